// The Communicator of an MPI rank: point-to-point messages and collectives
// built from non-blocking point-to-point MPI on duplicates of MPI_COMM_WORLD,
// so that every wait polls and can end with a timeout or an abort.
//
// A collective on a group is numbered, like the cpu backend's, by how many
// collectives this rank called before on the same member set. Its messages
// carry an MPI tag made of a hash of the member set and the call number's
// low bits; each member also sends each peer it exchanges data with a header
// naming what it called (operation, group order, root, operand types), which
// the peer compares with its own call: a disagreement is a Mismatch.
//
// Reductions are a direct reduce-scatter, member j receiving chunk j of every
// member's operand and summing it in group order, then an all-gather of the
// summed chunks: the traffic of a ring all-reduce, 2 (n - 1) / n of the
// bytes in and out of each member, and the cpu backend's bits exactly.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <span>
#include <utility>

#include "runtime/CallSignature.h"
#include "runtime/mpi/MpiAllReduce.h"
#include "runtime/mpi/MpiCall.h"
#include "runtime/mpi/MpiSums.h"
#include "runtime/mpi/MpiWire.h"
#include "runtime/mpi/MpiWorld.h"

namespace meshflow::runtime::mpi {
namespace {

using Kind = CommError::Kind;

// ---- Point to point ----

// A message whose header has arrived: its tensors, and the receives that
// fill them.
struct Incoming {
  std::vector<Tensor> tensors;
  std::vector<MPI_Request> requests;
};

// ---- The communicator ----

class MpiCommunicator final : public Communicator {
 public:
  explicit MpiCommunicator(MpiWorld& world) : world_(world), nextPayload_(world.size, 0) {}

  ~MpiCommunicator() override {
    for (auto& [key, queue] : mailboxes_)
      for (Incoming& message : queue)
        world_.abandon(message.requests, std::make_shared<std::vector<Tensor>>(message.tensors));
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      for (auto& [members, comm] : reduceComms_) MPI_Comm_free(&comm);
  }

  int device() const override { return world_.rank; }
  int deviceCount() const override { return world_.size; }

  void send(int peer, std::uint64_t tag, std::vector<Tensor> message) override {
    Text what = [&] { return fmt::format("send to device {} (tag {})", peer, tag); };
    checkDevice(peer, what);
    world_.throwIfAborted(what);
    if (peer == world_.rank) {
      mailboxes_[{peer, tag}].push_back(Incoming{std::move(message), {}});
      return;
    }
    auto tensors = std::make_shared<const std::vector<Tensor>>(std::move(message));
    Writer header;
    header.put<std::uint64_t>(tag);
    header.put<std::uint64_t>(nextPayload_[peer]);
    header.put<std::uint32_t>(static_cast<std::uint32_t>(tensors->size()));
    for (const Tensor& t : *tensors) writeType(header, OperandType::of(t));
    auto bytes = std::make_shared<const std::vector<std::byte>>(header.take());
    world_.postSend(kMessageHeaders, peer, 0, bytes->data(), bytes->size(), bytes);
    for (const Tensor& t : *tensors)
      if (t.allocated() && t.bytes() > 0)
        world_.postSend(kMessagePayloads, peer, payloadTag(nextPayload_[peer]++), t.raw().data(),
                        t.bytes(), tensors);
  }

  std::vector<Tensor> recv(int peer, std::uint64_t tag) override {
    Text what = [&] { return fmt::format("recv from device {} (tag {})", peer, tag); };
    checkDevice(peer, what);
    world_.throwIfAborted(what);
    std::pair<int, std::uint64_t> key{peer, tag};
    world_.await(
        what, world_.options.timeout,
        [&] {
          drainHeaders(peer);
          auto queue = mailboxes_.find(key);
          if (queue == mailboxes_.end()) return false;
          auto& requests = queue->second.front().requests;
          int flag = 0;
          checkMpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag,
                               MPI_STATUSES_IGNORE),
                   "MPI_Testall");
          return flag != 0;
        },
        [] { return std::string(); });
    auto queue = mailboxes_.find(key);
    std::vector<Tensor> message = std::move(queue->second.front().tensors);
    queue->second.pop_front();
    if (queue->second.empty()) mailboxes_.erase(queue);
    return message;
  }

  void allReduce(const std::vector<int>& group, std::vector<Tensor*> tensors) override {
    startAllReduce(group, std::move(tensors))->finish();
  }

  std::unique_ptr<PendingAllReduce> startAllReduce(const std::vector<int>& group,
                                                   std::vector<Tensor*> tensors) override {
    CallSignature call = checkedCall("allReduce", group);
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i] || !tensors[i]->allocated())
        throw usage(fmt::format("{}: tensor {} is unallocated", call.plain(), i));
      inputs.push_back(*tensors[i]);
      call.operands.push_back(OperandType::of(*tensors[i]));
    }
    if (!world_.options.deterministic && mpiCanSum(inputs)) {
      // Numbered as the others, so that later calls keep the cpu backend's numbers.
      std::string what = fmt::format("allReduce #{} over group {} (MPI_Iallreduce)",
                                     groups_.of(group).nextCall++, groupText(group));
      world_.throwIfAborted([&] { return what; });
      return std::make_unique<MpiOwnAllReduce>(world_, what, reduceComm(group), std::move(tensors));
    }
    auto op = std::make_shared<AllReduceOp>(world_, groups_, std::move(call), std::move(inputs));
    world_.background.push_back(op);
    return std::make_unique<MpiPendingAllReduce>(std::move(op), std::move(tensors));
  }

  void allGather(const std::vector<int>& group, const Tensor& input, Tensor& output) override {
    Call call(world_, groups_, withSlicedInput("allGather", group, input, 1));
    std::size_t n = call.members(), me = call.position(), bytes = input.bytes();
    Shape shape = input.shape();
    shape[0] *= static_cast<std::int64_t>(n);
    auto buffers = std::make_shared<std::vector<Tensor>>();
    buffers->push_back(input);
    buffers->push_back(Tensor::uninitialized(input.dtype(), std::move(shape)));
    call.holdBuffers(buffers);
    std::byte* out = (*buffers)[1].raw().data();
    for (std::size_t k = 0; k < n; ++k) {
      if (k == me) continue;
      exchangeHeaders(call, k);
      call.sendData(k, kCallData, input.raw().data(), bytes, buffers);
      call.recvData(k, kCallData, out + k * bytes, bytes, 0);
    }
    if (bytes > 0) std::memcpy(out + me * bytes, input.raw().data(), bytes);
    call.wait(0);
    output = (*buffers)[1];
  }

  void reduceScatter(const std::vector<int>& group, const Tensor& input, Tensor& output) override {
    Call call(world_, groups_, withSlicedInput("reduceScatter", group, input, group.size()));
    std::size_t n = call.members(), me = call.position(), bytes = input.bytes() / n;
    auto received = std::make_shared<std::vector<Scratch>>(n);
    auto inputs = std::make_shared<const Tensor>(input);
    call.holdBuffers(received);
    const std::byte* in = inputs->raw().data();
    for (std::size_t k = 0; k < n; ++k) {
      if (k == me) continue;
      exchangeHeaders(call, k);
      call.sendData(k, kCallData, in + k * bytes, bytes, inputs);
      if (bytes > 0) (*received)[k] = world_.takeScratch(bytes);
      call.recvData(k, kCallData, (*received)[k].data(), bytes, 0);
    }
    call.wait(0);
    Tensor sum = Tensor::uninitialized(input.dtype(), sliceShape(input.shape(), n));
    std::vector<const std::byte*> parts;
    for (std::size_t k = 0; k < n; ++k)
      parts.push_back(k == me ? in + me * bytes : (*received)[k].data());
    orderedSum(input.dtype(), parts, sum.raw().data(), bytes / ir::dtypeBytes(input.dtype()));
    output = std::move(sum);
    for (Scratch& buffer : *received) world_.giveScratch(std::move(buffer));
  }

  void allToAll(const std::vector<int>& group, const Tensor& input, Tensor& output) override {
    Call call(world_, groups_, withSlicedInput("allToAll", group, input, group.size()));
    std::size_t n = call.members(), me = call.position(), bytes = input.bytes() / n;
    auto buffers = std::make_shared<std::vector<Tensor>>();
    buffers->push_back(input);
    buffers->push_back(Tensor::uninitialized(input.dtype(), input.shape()));
    call.holdBuffers(buffers);
    const std::byte* in = input.raw().data();
    std::byte* out = (*buffers)[1].raw().data();
    for (std::size_t k = 0; k < n; ++k) {
      if (k == me) continue;
      exchangeHeaders(call, k);
      call.sendData(k, kCallData, in + k * bytes, bytes, buffers);
      call.recvData(k, kCallData, out + k * bytes, bytes, 0);
    }
    if (bytes > 0) std::memcpy(out + me * bytes, in + me * bytes, bytes);
    call.wait(0);
    output = (*buffers)[1];
  }

  void broadcast(const std::vector<int>& group, int root, Tensor& tensor) override {
    CallSignature info = checkedCall("broadcast", group);
    info.root = root;
    info.operandsAgree = false;
    if (std::find(group.begin(), group.end(), root) == group.end())
      throw usage(info.plain() + ": the root is not a member");
    if (root == world_.rank) {
      if (!tensor.allocated()) throw usage(info.plain() + ": the root's tensor is unallocated");
      info.operands.push_back(OperandType::of(tensor));
    }
    Call call(world_, groups_, std::move(info));
    std::size_t n = call.members();
    if (root == world_.rank) {
      auto value = std::make_shared<const Tensor>(tensor);
      for (std::size_t k = 0; k < n; ++k) {
        if (call.member(k) == root) continue;
        exchangeHeaders(call, k);
        call.sendData(k, kCallData, value->raw().data(), value->bytes(), value);
      }
      call.wait(0);
      return;
    }
    std::size_t from =
        static_cast<std::size_t>(std::find(group.begin(), group.end(), root) - group.begin());
    exchangeHeaders(call, from);
    call.wait(0);
    const OperandType& type = call.headerOf(from).operands.at(0);
    if (tensor.allocated() && OperandType::of(tensor) != type)
      throw CommError(
          Kind::Mismatch, world_.rank,
          fmt::format("{}: the tensor is {} on device {} but {} on device {}", call.describe(),
                      type.text(), root, tensor.typeText(), world_.rank));
    auto value = std::make_shared<Tensor>(Tensor::uninitialized(type.dtype, type.shape));
    call.holdBuffers(value);
    call.recvData(from, kCallData, value->raw().data(), value->bytes(), 0);
    call.wait(0);
    tensor = *value;
  }

  void barrier(const std::vector<int>& group) override {
    Call call(world_, groups_, checkedCall("barrier", group));
    for (std::size_t k = 0; k < call.members(); ++k)
      if (k != call.position()) exchangeHeaders(call, k);
    call.wait(0);
  }

 private:
  CommError usage(std::string detail) const { return world_.error(Kind::Usage, std::move(detail)); }

  void checkDevice(int device, const Text& what) const {
    if (device < 0 || device >= deviceCount())
      throw usage(fmt::format("{}: there is no device {} (the cluster has {})", what(), device,
                              deviceCount()));
  }

  CallSignature checkedCall(std::string op, const std::vector<int>& group) const {
    return runtime::checkedCall(std::move(op), group, world_.rank, deviceCount());
  }

  CallSignature withSlicedInput(std::string op, const std::vector<int>& group, const Tensor& input,
                                std::size_t parts) const {
    return slicedInputCall(std::move(op), group, world_.rank, deviceCount(), input, parts);
  }

  static void exchangeHeaders(Call& call, std::size_t k) {
    call.sendHeader(k);
    call.expectHeader(k);
  }

  int payloadTag(std::uint64_t sequence) const {
    return static_cast<int>(sequence % (static_cast<std::uint64_t>(world_.tagLimit) + 1));
  }

  // Takes every message header `peer` has sent, in order, and posts the
  // receives of their tensors.
  void drainHeaders(int peer) {
    for (;;) {
      int flag = 0;
      MPI_Status status;
      MPI_Iprobe(peer, 0, world_.comms[kMessageHeaders], &flag, &status);
      if (!flag) return;
      int length = 0;
      MPI_Get_count(&status, MPI_BYTE, &length);
      std::vector<std::byte> bytes(static_cast<std::size_t>(length));
      checkMpi(MPI_Recv(bytes.data(), length, MPI_BYTE, peer, 0, world_.comms[kMessageHeaders],
                        MPI_STATUS_IGNORE),
               "MPI_Recv");
      Reader r(bytes);
      auto tag = r.get<std::uint64_t>();
      auto sequence = r.get<std::uint64_t>();
      auto count = r.get<std::uint32_t>();
      Incoming message;
      for (std::uint32_t i = 0; i < count; ++i) {
        OperandType type = readType(r);
        if (!type.allocated) {
          message.tensors.emplace_back();
          continue;
        }
        Tensor t = Tensor::uninitialized(type.dtype, type.shape);
        if (t.bytes() > 0)
          world_.postRecv(kMessagePayloads, peer, payloadTag(sequence++), t.raw().data(), t.bytes(),
                          message.requests);
        message.tensors.push_back(std::move(t));
      }
      mailboxes_[{peer, tag}].push_back(std::move(message));
    }
  }

  static bool mpiCanSum(const std::vector<Tensor>& inputs) {
    return std::all_of(inputs.begin(), inputs.end(), [](const Tensor& t) {
      return t.dtype() == ir::DType::F32 || t.dtype() == ir::DType::I32;
    });
  }

  // The MPI communicator of `group`'s members, made on first use. Making it
  // is collective over the members (MPI_Comm_create_group) and waits for
  // them without a timeout.
  MPI_Comm reduceComm(const std::vector<int>& group) {
    std::vector<int> members = group;
    std::sort(members.begin(), members.end());
    auto found = reduceComms_.find(members);
    if (found != reduceComms_.end()) return found->second;
    MPI_Group world, subset;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, static_cast<int>(members.size()), members.data(), &subset);
    MPI_Comm comm;
    checkMpi(MPI_Comm_create_group(MPI_COMM_WORLD, subset, 0, &comm), "MPI_Comm_create_group");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Group_free(&subset);
    MPI_Group_free(&world);
    reduceComms_.emplace(members, comm);
    return comm;
  }

  MpiWorld& world_;
  Groups groups_;
  std::map<std::pair<int, std::uint64_t>, std::deque<Incoming>> mailboxes_;
  std::vector<std::uint64_t> nextPayload_;  // per peer: the next payload's sequence number
  std::map<std::vector<int>, MPI_Comm> reduceComms_;
};

}  // namespace

std::unique_ptr<Communicator> makeMpiCommunicator(MpiWorld& world) {
  return std::make_unique<MpiCommunicator>(world);
}

}  // namespace meshflow::runtime::mpi
