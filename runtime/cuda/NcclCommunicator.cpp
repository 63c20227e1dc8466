#include "runtime/cuda/NcclCommunicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <utility>

#include "runtime/cuda/SignatureTensor.h"

namespace meshflow::runtime::cuda {
namespace {

using Kind = CommError::Kind;

constexpr std::uint64_t kOwnTags = 1ull << 63;            // signatures: | hash of the member set
constexpr std::uint64_t kIdTags = kOwnTags | 1ull << 62;  // unique ids: | hash of the ordered group
constexpr std::uint64_t kHeaderTag = kOwnTags | 1ull << 61;  // message headers, one stream per pair
constexpr std::uint64_t kHashBits = (1ull << 61) - 1;

std::uint64_t hashOf(const std::vector<int>& values) {  // FNV-1a over the ints
  std::uint64_t hash = 14695981039346656037ull;
  for (int value : values) {
    hash ^= static_cast<std::uint32_t>(value);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::vector<int> membersOf(std::vector<int> group) {
  std::sort(group.begin(), group.end());
  return group;
}

std::uint64_t signatureTag(const std::vector<int>& group) {
  return kOwnTags | (hashOf(membersOf(group)) & kHashBits);
}
std::uint64_t idTag(const std::vector<int>& group) { return kIdTags | (hashOf(group) & kHashBits); }

int positionOf(const std::vector<int>& group, int device) {
  return static_cast<int>(std::find(group.begin(), group.end(), device) - group.begin());
}

std::size_t countOf(const Tensor& t) { return static_cast<std::size_t>(t.elements()); }

// `t` where NCCL can read it: a tensor in the plain heap (no DeviceMemory: a
// step's batch, say) is copied into the current MemoryScope's memory first —
// the GPU's, on a device's thread of the cuda backend.
Tensor onDevice(const Tensor& t) {
  return t.allocated() && t.bytes() > 0 && !t.memory() ? t.clone() : t;
}

// Closes an NCCL group however the calls inside it end.
class GroupScope {
 public:
  GroupScope(NcclComm& comm, const std::string& what) : comm_(comm) {
    comm.checkEnqueued(comm.calls().groupStart(), what + " (ncclGroupStart)");
  }
  ~GroupScope() {
    if (open_) comm_.calls().groupEnd();
  }
  void end(const std::string& what) {
    open_ = false;
    comm_.checkEnqueued(comm_.calls().groupEnd(), what + " (ncclGroupEnd)");
  }

 private:
  NcclComm& comm_;
  bool open_ = true;
};

}  // namespace

struct NcclCommunicator::Deferred {
  Call call;
  std::vector<Tensor*> tensors;
  bool enqueued = false;
  bool checked = false;      // the other members' signatures received and compared
  NcclEvent done = nullptr;  // recorded after its reduction, on its stream
  std::function<void(NcclEvent)> destroyEvent;

  Deferred(Call c, std::vector<Tensor*> t) : call(std::move(c)), tensors(std::move(t)) {}
  Deferred(const Deferred&) = delete;
  Deferred& operator=(const Deferred&) = delete;
  ~Deferred() {
    if (done) destroyEvent(done);
  }
};

class NcclPendingAllReduce final : public PendingAllReduce {
 public:
  NcclPendingAllReduce(NcclCommunicator& owner, std::shared_ptr<NcclCommunicator::Deferred> started)
      : owner_(owner), started_(std::move(started)) {}
  ~NcclPendingAllReduce() override {
    // Enqueued at least, so that the other members' reduction completes, and
    // its signatures taken, so that the next call on the group reads its own.
    if (!started_->checked) try {
        owner_.flushStarted(started_->call.signature.group, started_.get());
      } catch (...) {
      }
  }
  void finish() override { owner_.finishStarted(*started_); }

 private:
  NcclCommunicator& owner_;
  std::shared_ptr<NcclCommunicator::Deferred> started_;
};

NcclCommunicator::NcclCommunicator(Communicator& control, NcclCommunicatorOptions options)
    : control_(control), options_(std::move(options)) {}

NcclCommunicator::~NcclCommunicator() {
  for (const auto& [group, stream] : startedStreams_) options_.calls.destroyStream(stream);
}

// ---- Point to point ----

void NcclCommunicator::checkPeer(std::uint64_t tag, const char* op, int peer) const {
  if (tag & kOwnTags)
    throw CommError(
        Kind::Usage, device(),
        fmt::format("{} device {} (tag {}): tags from 2^63 up are the NCCL communicator's own", op,
                    peer, tag));
  if (peer < 0 || peer >= deviceCount())
    throw CommError(Kind::Usage, device(),
                    fmt::format("{} device {} (tag {}): there is no device {} (the cluster has {})",
                                op, peer, tag, peer, deviceCount()));
}

void NcclCommunicator::settleKernels(const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  while (!options_.calls.streamDone(options_.stream)) {
    if (std::chrono::steady_clock::now() >= deadline)
      throw CommError(Kind::Timeout, device(),
                      fmt::format("{}: the device's own kernels did not finish within {} ms", what,
                                  options_.timeout.count()));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

void NcclCommunicator::releaseSent() {
  for (auto& [peer, sender] : senders_) sender->takeSent();
}

void NcclCommunicator::send(int peer, std::uint64_t tag, std::vector<Tensor> message) {
  checkPeer(tag, "send to", peer);
  releaseSent();
  if (peer == device()) {
    toSelf_[tag].push_back(std::move(message));
    return;
  }
  const std::string what = fmt::format("send to device {} (tag {})", peer, tag);
  settleKernels(what);
  std::vector<const void*> data;
  for (Tensor& t : message) {
    t = onDevice(t);
    data.push_back(t.allocated() && t.elements() > 0 ? std::as_const(t).deviceData() : nullptr);
  }
  try {
    auto found = senders_.find(peer);
    if (found == senders_.end()) {
      const NcclId id = NcclComm::makeId(options_.calls);
      control_.send(peer, kHeaderTag, messageHeader(tag, message, &id));
      NcclPairOptions pair{options_.calls, options_.prepareThread, options_.stopped,
                           fmt::format("messages from device {} to device {}", device(), peer)};
      found = senders_.emplace(peer, std::make_unique<NcclPairSender>(std::move(pair), id)).first;
    } else {
      control_.send(peer, kHeaderTag, messageHeader(tag, message, nullptr));
    }
    found->second->post(std::move(message), std::move(data));
  } catch (const NcclError& error) {
    throw CommError(Kind::Aborted, device(), what + ": " + error.what());
  }
}

std::vector<Tensor> NcclCommunicator::recv(int peer, std::uint64_t tag) {
  checkPeer(tag, "recv from", peer);
  releaseSent();
  const std::string what = fmt::format("recv from device {} (tag {})", peer, tag);
  if (peer == device()) {
    auto queue = toSelf_.find(tag);
    if (queue == toSelf_.end())
      throw CommError(Kind::Timeout, device(),
                      what + ": this device sent itself no such message, so none can come");
    std::vector<Tensor> message = std::move(queue->second.front());
    queue->second.pop_front();
    if (queue->second.empty()) toSelf_.erase(queue);
    return message;
  }
  auto& inbox = inboxes_[peer];
  if (!inbox)
    inbox = std::make_unique<NcclInbox>(
        options_.calls, fmt::format("messages from device {} to device {}", peer, device()));
  try {
    while (!inbox->has(tag)) inbox->accept(control_.recv(peer, kHeaderTag));
    return inbox->take(tag, options_.timeout, options_.stopped, what);
  } catch (const NcclError& error) {
    rethrow(error);
  } catch (const std::invalid_argument& error) {
    throw CommError(Kind::Mismatch, device(), what + ": " + error.what());
  }
}

// ---- Calls: numbering, signatures, communicators, waits ----

NcclCommunicator::Call NcclCommunicator::begin(CallSignature signature) {
  releaseSent();
  Call call{std::move(signature), 0, ""};
  call.number = nextCall_[membersOf(call.signature.group)]++;
  call.what = call.signature.describe(call.number);
  auto comm = comms_.find(call.signature.group);
  if (comm != comms_.end() && comm->second->aborted())
    throw CommError(
        Kind::Aborted, device(),
        call.what + ": the group's NCCL communicator was aborted by an earlier failure");
  const Tensor mine = signatureTensor(call.signature);
  for (int member : call.signature.group)
    if (member != device()) control_.send(member, signatureTag(call.signature.group), {mine});
  return call;
}

std::vector<CallSignature> NcclCommunicator::checkSignatures(const Call& call) {
  const std::vector<int>& group = call.signature.group;
  std::vector<CallSignature> calls;
  for (int member : group)
    calls.push_back(member == device()
                        ? call.signature
                        : signatureOf(control_.recv(member, signatureTag(group)).at(0)));
  for (std::size_t k = 1; k < group.size(); ++k)
    if (auto difference = callDifference(group[0], calls[0], group[k], calls[k]))
      throw CommError(Kind::Mismatch, device(), call.what + ": " + *difference);
  return calls;
}

NcclComm& NcclCommunicator::commOf(const std::vector<int>& group) {
  auto found = comms_.find(group);
  if (found != comms_.end()) return *found->second;
  const int rank = positionOf(group, device());
  Broadcast bootstrap = [&](std::span<std::byte> bytes, int) {
    if (rank == 0) {
      Tensor id =
          Tensor::uninitialized(ir::DType::I32, {static_cast<std::int64_t>(bytes.size() / 4)});
      std::memcpy(id.raw().data(), bytes.data(), bytes.size());
      for (std::size_t k = 1; k < group.size(); ++k) control_.send(group[k], idTag(group), {id});
      return;
    }
    Tensor id = control_.recv(group[0], idTag(group)).at(0);
    if (id.bytes() != bytes.size())
      throw NcclError(fmt::format("the NCCL unique id from device {} has {} bytes, not {}",
                                  group[0], id.bytes(), bytes.size()));
    std::memcpy(bytes.data(), std::as_const(id).raw().data(), bytes.size());
  };
  try {
    auto comm =
        std::make_unique<NcclComm>(options_.calls, bootstrap, rank, static_cast<int>(group.size()));
    return *comms_.emplace(group, std::move(comm)).first->second;
  } catch (const NcclError& error) {
    throw CommError(Kind::Aborted, device(),
                    fmt::format("joining the NCCL communicator of group {}: {}", groupText(group),
                                error.what()));
  }
}

void NcclCommunicator::rethrow(const NcclError& error) const {
  throw CommError(error.kind() == NcclError::Kind::TimedOut ? Kind::Timeout : Kind::Aborted,
                  device(), error.what());
}

void NcclCommunicator::enqueue(const Call& call, const std::function<void(NcclComm&)>& calls) {
  NcclComm& comm = commOf(call.signature.group);
  try {
    GroupScope scope(comm, call.what);
    calls(comm);
    scope.end(call.what);
  } catch (const NcclError& error) {
    rethrow(error);
  }
}

void NcclCommunicator::waitFor(const std::vector<int>& group, const std::string& what,
                               const std::function<bool()>& done) {
  NcclComm& comm = commOf(group);
  const NcclCalls& calls = comm.calls();
  try {
    comm.wait(
        [&] {
          if (options_.stopped && options_.stopped())
            comm.abort(fmt::format("{} on rank {}: the job stopped (another device failed)", what,
                                   comm.rank()));
          return done ? done() : calls.streamDone(options_.stream);
        },
        options_.timeout, what);
  } catch (const NcclError& error) {
    rethrow(error);
  }
}

void NcclCommunicator::runGroup(const Call& call, const std::function<void(NcclComm&)>& calls) {
  enqueue(call, calls);
  waitFor(call.signature.group, call.what);
}

// ---- All-reduce, started or not ----

namespace {

CallSignature allReduceCall(const std::vector<int>& group, int device, int devices,
                            const std::vector<Tensor*>& tensors) {
  CallSignature signature = checkedCall("allReduce", group, device, devices);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i] || !tensors[i]->allocated())
      throw CommError(Kind::Usage, device,
                      fmt::format("{}: tensor {} is unallocated", signature.plain(), i));
    signature.operands.push_back(OperandType::of(*tensors[i]));
  }
  return signature;
}

}  // namespace

// Signatures first, as every blocking collective: a disagreement is a
// Mismatch before NCCL runs.
void NcclCommunicator::allReduce(const std::vector<int>& group, std::vector<Tensor*> tensors) {
  Call call = begin(allReduceCall(group, device(), deviceCount(), tensors));
  settleStarted(group);
  checkSignatures(call);
  Deferred now(std::move(call), std::move(tensors));
  enqueueAllReduce(now, options_.stream);
  waitFor(group, now.call.what);
}

std::unique_ptr<PendingAllReduce> NcclCommunicator::startAllReduce(const std::vector<int>& group,
                                                                   std::vector<Tensor*> tensors) {
  Call call = begin(allReduceCall(group, device(), deviceCount(), tensors));
  auto started = std::make_shared<Deferred>(std::move(call), std::move(tensors));
  started_[membersOf(group)].push_back(started);
  // Where the group's communicator is joined, the reduction starts now on a
  // stream of its own, beside the device's next kernels; its signatures are
  // compared when it finishes. Joining waits for every member, so a group's
  // first all-reduce waits to be enqueued until it finishes or another call
  // on the group comes (a started call never waits for the others).
  if (auto comm = comms_.find(group); comm != comms_.end() && !comm->second->aborted()) {
    settleKernels(started->call.what);  // the gradients are written
    enqueueStarted(*started);
  }
  return std::make_unique<NcclPendingAllReduce>(*this, std::move(started));
}

NcclStream NcclCommunicator::startedStream(const std::vector<int>& group) {
  auto [it, made] = startedStreams_.try_emplace(group, nullptr);
  if (made) it->second = options_.calls.makeStream();
  return it->second;
}

void NcclCommunicator::flushStarted(const std::vector<int>& group, const Deferred* upTo) {
  auto& queue = started_[membersOf(group)];
  while (!queue.empty()) {
    std::shared_ptr<Deferred> started = queue.front();
    queue.pop_front();
    started->checked = true;  // whatever happens next, its signatures are taken
    if (!started->enqueued) {
      started->enqueued = true;  // whatever happens next, it is not enqueued again
      checkSignatures(started->call);
      enqueueStarted(*started);
    } else {
      checkStartedSignatures(*started);
    }
    if (started.get() == upTo) return;
  }
}

// The signatures of an all-reduce NCCL already has: a disagreement aborts the
// group's communicator (the reduction may never end) and is a Mismatch here
// as on every other member.
void NcclCommunicator::checkStartedSignatures(const Deferred& started) {
  try {
    checkSignatures(started.call);
  } catch (const CommError& mismatch) {
    try {
      commOf(started.call.signature.group).abort(mismatch.detail());
    } catch (const NcclError&) {
    }
    throw;
  }
}

void NcclCommunicator::enqueueAllReduce(Deferred& started, NcclStream stream) {
  enqueue(started.call, [&](NcclComm& comm) {
    for (Tensor* t : started.tensors) {
      if (t->elements() == 0) continue;
      *t = onDevice(*t);
      void* data = t->deviceData();
      comm.checkEnqueued(
          comm.calls().allReduce(data, data, countOf(*t), t->dtype(), comm.handle(), stream),
          started.call.what);
    }
  });
}

// On the group's started stream, with an event after it: finish() waits for
// this reduction, not for the ones started after it.
void NcclCommunicator::enqueueStarted(Deferred& started) {
  started.enqueued = true;
  const NcclStream stream = startedStream(started.call.signature.group);
  enqueueAllReduce(started, stream);
  started.destroyEvent = options_.calls.destroyEvent;
  try {
    started.done = options_.calls.recordEvent(stream);
  } catch (const std::exception& error) {
    throw CommError(Kind::Aborted, device(), started.call.what + ": " + error.what());
  }
}

void NcclCommunicator::finishStarted(Deferred& started) {
  if (!started.checked) flushStarted(started.call.signature.group, &started);
  if (!started.done) return;  // its enqueuing failed, which was reported then
  waitFor(started.call.signature.group, started.call.what,
          [&] { return options_.calls.eventDone(started.done); });
}

// Before another collective on `group`'s members: the started all-reduces'
// signatures come first on the control channel, and their reductions end
// before NCCL is handed the next call on another stream.
void NcclCommunicator::settleStarted(const std::vector<int>& group) {
  flushStarted(group);
  for (const auto& [ordered, stream] : startedStreams_)
    if (membersOf(ordered) == membersOf(group))
      waitFor(ordered, fmt::format("the all-reduces started over group {}", groupText(ordered)),
              [&, s = stream] { return options_.calls.streamDone(s); });
}

// ---- The other collectives ----

void NcclCommunicator::allGather(const std::vector<int>& group, const Tensor& input,
                                 Tensor& output) {
  Call call = begin(slicedInputCall("allGather", group, device(), deviceCount(), input, 1));
  settleStarted(group);
  checkSignatures(call);
  const Tensor staged = onDevice(input);
  Shape shape = input.shape();
  shape[0] *= static_cast<std::int64_t>(group.size());
  Tensor gathered = Tensor::uninitialized(input.dtype(), std::move(shape));
  if (input.elements() > 0)
    runGroup(call, [&](NcclComm& comm) {
      comm.checkEnqueued(
          comm.calls().allGather(staged.deviceData(), gathered.deviceData(), countOf(input),
                                 input.dtype(), comm.handle(), options_.stream),
          call.what);
    });
  output = std::move(gathered);
}

void NcclCommunicator::reduceScatter(const std::vector<int>& group, const Tensor& input,
                                     Tensor& output) {
  Call call =
      begin(slicedInputCall("reduceScatter", group, device(), deviceCount(), input, group.size()));
  settleStarted(group);
  checkSignatures(call);
  const Tensor staged = onDevice(input);
  Shape shape = input.shape();
  shape[0] /= static_cast<std::int64_t>(group.size());
  Tensor slice = Tensor::uninitialized(input.dtype(), std::move(shape));
  if (slice.elements() > 0)
    runGroup(call, [&](NcclComm& comm) {
      comm.checkEnqueued(
          comm.calls().reduceScatter(staged.deviceData(), slice.deviceData(), countOf(slice),
                                     input.dtype(), comm.handle(), options_.stream),
          call.what);
    });
  output = std::move(slice);
}

void NcclCommunicator::allToAll(const std::vector<int>& group, const Tensor& input,
                                Tensor& output) {
  Call call =
      begin(slicedInputCall("allToAll", group, device(), deviceCount(), input, group.size()));
  settleStarted(group);
  checkSignatures(call);
  const Tensor staged = onDevice(input);
  Tensor exchanged = Tensor::uninitialized(input.dtype(), input.shape());
  const std::size_t count = countOf(input) / group.size();
  const std::size_t bytes = count * ir::dtypeBytes(input.dtype());
  if (count > 0)
    runGroup(call, [&](NcclComm& comm) {
      const auto* in = static_cast<const std::byte*>(staged.deviceData());
      auto* out = static_cast<std::byte*>(exchanged.deviceData());
      const NcclCalls& calls = comm.calls();
      for (std::size_t k = 0; k < group.size(); ++k) {
        const int peer = static_cast<int>(k);
        comm.checkEnqueued(
            calls.send(in + k * bytes, count, input.dtype(), peer, comm.handle(), options_.stream),
            call.what);
        comm.checkEnqueued(
            calls.recv(out + k * bytes, count, input.dtype(), peer, comm.handle(), options_.stream),
            call.what);
      }
    });
  output = std::move(exchanged);
}

void NcclCommunicator::broadcast(const std::vector<int>& group, int root, Tensor& tensor) {
  CallSignature signature = checkedCall("broadcast", group, device(), deviceCount());
  signature.root = root;
  signature.operandsAgree = false;
  if (std::find(group.begin(), group.end(), root) == group.end())
    throw CommError(Kind::Usage, device(), signature.plain() + ": the root is not a member");
  const bool isRoot = root == device();
  if (isRoot && !tensor.allocated())
    throw CommError(Kind::Usage, device(),
                    signature.plain() + ": the root's tensor is unallocated");
  // A member's allocated tensor travels in its signature too, so that every
  // member sees a disagreement with the root's and none enqueues the broadcast.
  if (tensor.allocated()) signature.operands.push_back(OperandType::of(tensor));
  Call call = begin(std::move(signature));
  settleStarted(group);
  const std::vector<CallSignature> calls = checkSignatures(call);
  const OperandType type = calls[static_cast<std::size_t>(positionOf(group, root))].operands.at(0);
  for (std::size_t k = 0; k < group.size(); ++k)
    if (!calls[k].operands.empty() && calls[k].operands[0] != type)
      throw CommError(
          Kind::Mismatch, device(),
          fmt::format("{}: the tensor is {} on device {} but {} on device {}", call.what,
                      type.text(), root, calls[k].operands[0].text(), group[k]));
  Tensor value = isRoot ? onDevice(tensor) : Tensor::uninitialized(type.dtype, type.shape);
  if (value.elements() > 0)
    runGroup(call, [&](NcclComm& comm) {
      // The root broadcasts in place: NCCL reads its buffer and writes none.
      void* data =
          isRoot ? const_cast<void*>(std::as_const(value).deviceData()) : value.deviceData();
      comm.checkEnqueued(
          comm.calls().broadcast(data, data, countOf(value), value.dtype(), positionOf(group, root),
                                 comm.handle(), options_.stream),
          call.what);
    });
  tensor = std::move(value);
}

void NcclCommunicator::barrier(const std::vector<int>& group) {
  // Every member's signature reaches every other: that alone is the barrier.
  Call call = begin(checkedCall("barrier", group, device(), deviceCount()));
  settleStarted(group);
  checkSignatures(call);
}

}  // namespace meshflow::runtime::cuda
