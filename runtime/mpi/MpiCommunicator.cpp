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

#include "runtime/mpi/MpiWorld.h"

namespace meshflow::runtime::mpi {
namespace {

using Kind = CommError::Kind;

// ---- Bytes on the wire ----

class Writer {
 public:
  template <class T>
  void put(T value) {
    auto* bytes = reinterpret_cast<const std::byte*>(&value);
    out_.insert(out_.end(), bytes, bytes + sizeof(T));
  }
  std::vector<std::byte> take() { return std::move(out_); }

 private:
  std::vector<std::byte> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <class T>
  T get() {
    if (at_ + sizeof(T) > in_.size()) throw std::runtime_error("a truncated meshflow MPI header");
    T value;
    std::memcpy(&value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  std::size_t consumed() const { return at_; }

 private:
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

// A tensor's dtype and shape, or an unallocated tensor.
struct TensorType {
  bool allocated = false;
  ir::DType dtype = ir::DType::F32;
  Shape shape;

  static TensorType of(const Tensor& t) { return {t.allocated(), t.dtype(), t.shape()}; }
  std::string text() const {
    return allocated ? ir::dtypeName(dtype) + shapeText(shape) : "unallocated";
  }
  std::size_t bytes() const {
    return allocated ? static_cast<std::size_t>(shapeElements(shape)) * ir::dtypeBytes(dtype) : 0;
  }
  bool operator==(const TensorType&) const = default;

  void write(Writer& w) const {
    w.put<std::uint8_t>(allocated);
    w.put<std::uint8_t>(static_cast<std::uint8_t>(dtype));
    w.put<std::uint32_t>(static_cast<std::uint32_t>(shape.size()));
    for (std::int64_t d : shape) w.put<std::int64_t>(d);
  }
  static TensorType read(Reader& r) {
    TensorType t;
    t.allocated = r.get<std::uint8_t>() != 0;
    t.dtype = static_cast<ir::DType>(r.get<std::uint8_t>());
    auto rank = r.get<std::uint32_t>();
    for (std::uint32_t i = 0; i < rank; ++i) t.shape.push_back(r.get<std::int64_t>());
    return t;
  }
};

// ---- Element ranges (as the cpu backend's LocalCluster.cpp) ----

// to[i] = a[i] + b[i] for one dtype, rounding half sums once per addition as
// the cpu backend does; i32 wraps modulo 2^32.
void addInto(ir::DType dtype, const std::byte* a, const std::byte* b, std::byte* to,
             std::size_t count) {
  switch (dtype) {
    case ir::DType::F32: {
      auto* x = reinterpret_cast<const float*>(a);
      auto* y = reinterpret_cast<const float*>(b);
      auto* z = reinterpret_cast<float*>(to);
      for (std::size_t i = 0; i < count; ++i) z[i] = x[i] + y[i];
      return;
    }
    case ir::DType::BF16: {
      auto* x = reinterpret_cast<const BFloat16*>(a);
      auto* y = reinterpret_cast<const BFloat16*>(b);
      auto* z = reinterpret_cast<BFloat16*>(to);
      for (std::size_t i = 0; i < count; ++i)
        z[i] = toBFloat16(fromBFloat16(x[i]) + fromBFloat16(y[i]));
      return;
    }
    case ir::DType::F16: {
      auto* x = reinterpret_cast<const Half*>(a);
      auto* y = reinterpret_cast<const Half*>(b);
      auto* z = reinterpret_cast<Half*>(to);
      for (std::size_t i = 0; i < count; ++i) z[i] = toHalf(fromHalf(x[i]) + fromHalf(y[i]));
      return;
    }
    case ir::DType::I32: {
      auto* x = reinterpret_cast<const std::int32_t*>(a);
      auto* y = reinterpret_cast<const std::int32_t*>(b);
      auto* z = reinterpret_cast<std::int32_t*>(to);
      for (std::size_t i = 0; i < count; ++i)
        z[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(x[i]) +
                                         static_cast<std::uint32_t>(y[i]));
      return;
    }
    default:
      throw std::logic_error(fmt::format("no sum of {} tensors", ir::dtypeName(dtype)));
  }
}

// to = ((x0 + x1) + x2) + ... over `inputs` in order: the cpu backend's
// orderedSum, element by element.
void orderedSum(ir::DType dtype, const std::vector<const std::byte*>& inputs, std::byte* to,
                std::size_t count) {
  if (count == 0) return;
  if (inputs.size() == 1) {
    std::memcpy(to, inputs[0], count * ir::dtypeBytes(dtype));
    return;
  }
  addInto(dtype, inputs[0], inputs[1], to, count);
  for (std::size_t k = 2; k < inputs.size(); ++k) addInto(dtype, to, inputs[k], to, count);
}

// The first element of chunk k of n over `elements` (chunk sizes differ by at most one).
std::size_t chunkStart(std::size_t elements, std::size_t k, std::size_t n) {
  return elements * k / n;
}

Shape sliceShape(Shape shape, std::size_t parts) {
  shape[0] /= static_cast<std::int64_t>(parts);
  return shape;
}

// ---- What a member called ----

enum class Op : std::uint8_t { AllReduce, AllGather, ReduceScatter, AllToAll, Broadcast, Barrier };

const char* opName(Op op) {
  switch (op) {
    case Op::AllReduce:
      return "allReduce";
    case Op::AllGather:
      return "allGather";
    case Op::ReduceScatter:
      return "reduceScatter";
    case Op::AllToAll:
      return "allToAll";
    case Op::Broadcast:
      return "broadcast";
    case Op::Barrier:
      return "barrier";
  }
  return "?";
}

struct CallInfo {
  Op op = Op::Barrier;
  std::vector<int> group;
  int root = -1;
  std::vector<TensorType> types;
  // Whether every member brings operands of the same types (all but broadcast).
  bool operandsAgree = true;

  std::vector<std::byte> encode(std::uint64_t number) const {
    Writer w;
    w.put<std::uint8_t>(static_cast<std::uint8_t>(op));
    w.put<std::uint64_t>(number);
    w.put<std::int32_t>(root);
    w.put<std::uint8_t>(operandsAgree);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(group.size()));
    for (int m : group) w.put<std::int32_t>(m);
    w.put<std::uint32_t>(static_cast<std::uint32_t>(types.size()));
    for (const TensorType& t : types) t.write(w);
    return w.take();
  }
  /// `consumed`: where the header ends in `bytes` (a payload may follow).
  static CallInfo decode(std::span<const std::byte> bytes, std::uint64_t& number,
                         std::size_t& consumed) {
    Reader r(bytes);
    CallInfo call;
    call.op = static_cast<Op>(r.get<std::uint8_t>());
    number = r.get<std::uint64_t>();
    call.root = r.get<std::int32_t>();
    call.operandsAgree = r.get<std::uint8_t>() != 0;
    auto members = r.get<std::uint32_t>();
    for (std::uint32_t i = 0; i < members; ++i) call.group.push_back(r.get<std::int32_t>());
    auto count = r.get<std::uint32_t>();
    for (std::uint32_t i = 0; i < count; ++i) call.types.push_back(TensorType::read(r));
    consumed = r.consumed();
    return call;
  }
};

std::string operandName(const CallInfo& call, std::size_t index) {
  return call.types.size() == 1 && call.op != Op::AllReduce ? "the input"
                                                            : fmt::format("tensor {}", index);
}

std::string tensorCount(const CallInfo& call) {
  std::size_t n = call.types.size();
  return fmt::format("{} tensor{}", n, n == 1 ? "" : "s");
}

// How the calls of devices a and b (a first in group order) differ, worded
// as the cpu backend words it.
std::optional<std::string> callDifference(int a, const CallInfo& x, int b, const CallInfo& y) {
  if (x.op != y.op)
    return fmt::format("device {} called {} but device {} {}", a, opName(x.op), b, opName(y.op));
  if (x.group != y.group)
    return fmt::format("device {} gave the group as {} but device {} as {}", a, groupText(x.group),
                       b, groupText(y.group));
  if (x.root != y.root)
    return fmt::format("device {} named root device {} but device {} root device {}", a, x.root, b,
                       y.root);
  if (!x.operandsAgree) return std::nullopt;
  if (x.types.size() != y.types.size())
    return fmt::format("device {} passed {} but device {} {}", a, tensorCount(x), b,
                       tensorCount(y));
  for (std::size_t i = 0; i < x.types.size(); ++i)
    if (x.types[i] != y.types[i])
      return fmt::format("{} is {} on device {} but {} on device {}", operandName(x, i),
                         x.types[i].text(), a, y.types[i].text(), b);
  return std::nullopt;
}

// ---- One collective call: its headers and data messages ----

// The group state a rank keeps: calls numbered per member set, and which
// member set owns each tag hash (two sets sharing one could mix their messages).
struct Groups {
  std::map<std::vector<int>, std::uint64_t> nextCall;
  std::map<int, std::vector<int>> setOfHash;
};

constexpr int kCallBits = 7;  // call numbers modulo 128 in the tag

// One member's part of one collective. Headers are exchanged with the peers
// named by exchangeHeaders(); data receives are posted with a stage (0 or 1),
// and poll(stage) says whether every header and every receive up to that
// stage has arrived. Headers are checked as they arrive.
class Call {
 public:
  Call(MpiWorld& world, Groups& groups, CallInfo info) : world_(world), info_(std::move(info)) {
    std::vector<int> members = info_.group;
    std::sort(members.begin(), members.end());
    number_ = groups.nextCall[members]++;
    describe_ =
        fmt::format("{} #{} over group {}", opName(info_.op), number_, groupText(info_.group));
    if (info_.root >= 0) describe_ += fmt::format(" (root device {})", info_.root);
    tag_ = tagOf(groups, members);
    position_ = static_cast<std::size_t>(
        std::find(info_.group.begin(), info_.group.end(), world_.rank) - info_.group.begin());
    peers_.resize(info_.group.size());
    world_.throwIfAborted(describe_);
  }

  ~Call() {
    // Receives this call no longer waits for (it failed): MPI may still
    // write into their buffers, which live on with them.
    for (Peer& peer : peers_) world_.abandon(peer.requests, holder_);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  const std::string& describe() const { return describe_; }
  const CallInfo& info() const { return info_; }
  std::size_t position() const { return position_; }
  std::size_t members() const { return info_.group.size(); }
  int member(std::size_t k) const { return info_.group[k]; }
  /// Keeps the buffers of this call's receives alive if the call is abandoned.
  void holdBuffers(std::shared_ptr<const void> holder) { holder_ = std::move(holder); }

  /// Sends member k this call's header, and `payload` after it in the same
  /// message (a small operand: one message instead of two halves the latency).
  void sendHeader(std::size_t k, std::span<const std::byte> payload = {}) {
    std::vector<std::byte> message = info_.encode(number_);
    message.insert(message.end(), payload.begin(), payload.end());
    auto bytes = std::make_shared<const std::vector<std::byte>>(std::move(message));
    world_.postSend(kCallHeaders, member(k), tag_, bytes->data(), bytes->size(), bytes);
  }
  /// What member k sent after its header (once the header is in).
  std::span<const std::byte> payload(std::size_t k) const {
    const Peer& peer = peers_[k];
    return std::span<const std::byte>(peer.message).subspan(peer.payloadAt);
  }
  void expectHeader(std::size_t k) { peers_[k].headerExpected = true; }

  void sendData(std::size_t k, Channel channel, const std::byte* data, std::size_t bytes,
                std::shared_ptr<const void> holder) {
    if (bytes > 0) world_.postSend(channel, member(k), tag_, data, bytes, std::move(holder));
  }
  void recvData(std::size_t k, Channel channel, std::byte* data, std::size_t bytes, int stage) {
    if (bytes == 0) return;
    Peer& peer = peers_[k];
    std::size_t before = peer.requests.size();
    world_.postRecv(channel, member(k), tag_, data, bytes, peer.requests);
    peer.stages.resize(peer.requests.size(), stage);
    peer.expectedBytes.resize(peer.requests.size(), 0);
    for (std::size_t i = before; i < peer.requests.size(); ++i)
      peer.expectedBytes[i] = std::min(kPieceBytes, bytes - (i - before) * kPieceBytes);
  }

  // Whether every expected header and every receive of a stage up to `stage`
  // has arrived. Once every header is in, throws Mismatch when any member's
  // call differs from this one: the first such member in group order, as the
  // cpu backend reports it.
  bool poll(int stage) {
    bool complete = true, headersIn = true;
    std::optional<int> wrongSize;
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      Peer& peer = peers_[k];
      if (peer.headerExpected && !peer.header) receiveHeader(k);
      if (peer.headerExpected && !peer.header) complete = headersIn = false;
      for (std::size_t i = 0; i < peer.requests.size(); ++i) {
        if (peer.requests[i] == MPI_REQUEST_NULL || peer.stages[i] > stage) continue;
        int flag = 0;
        MPI_Status status;
        int code = MPI_Test(&peer.requests[i], &flag, &status);
        if (!flag && code == MPI_SUCCESS) {
          complete = false;
          continue;
        }
        int got = -1;
        if (code == MPI_SUCCESS) MPI_Get_count(&status, MPI_BYTE, &got);
        if (code != MPI_SUCCESS || static_cast<std::size_t>(got) != peer.expectedBytes[i]) {
          peer.requests[i] = MPI_REQUEST_NULL;
          peer.wrongSize = true;
        }
      }
      if (peer.wrongSize && !wrongSize) wrongSize = member(k);
    }
    if (!headersIn) return false;
    if (!checked_) {
      checked_ = true;
      if (auto differs = difference())
        throw world_.error(Kind::Mismatch, describe_ + ": " + *differs);
    }
    // Headers that agree with a message of another size: not a call that
    // this one can tell apart, but not one it can complete either.
    if (wrongSize)
      throw world_.error(Kind::Mismatch,
                         fmt::format("{}: device {} sent a message of another size than this call "
                                     "expects",
                                     describe_, *wrongSize));
    return complete;
  }

  // Waits for stage `stage`. A wait that times out with a header in that
  // disagrees is a Mismatch: the disagreement, not the wait, is the error.
  void wait(int stage) {
    waitFor(
        describe_, [&] { return poll(stage); }, [&] { return missingText(stage); });
  }
  void waitFor(const std::string& what, const std::function<bool()>& ready,
               const std::function<std::string()>& missing) {
    try {
      world_.await(what, world_.options.timeout, ready, missing);
    } catch (const CommError& e) {
      if (e.kind() != Kind::Timeout) throw;
      if (auto differs = difference())
        throw world_.error(Kind::Mismatch, describe_ + ": " + *differs);
      throw;
    }
  }

  // How the first member in group order whose header has arrived and differs
  // from this call differs from it.
  std::optional<std::string> difference() const {
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      if (!peers_[k].header) continue;
      const CallInfo& theirs = *peers_[k].header;
      int other = member(k);
      auto differs = k > position_ ? callDifference(world_.rank, info_, other, theirs)
                                   : callDifference(other, theirs, world_.rank, info_);
      if (!differs && peers_[k].number != number_)
        differs = fmt::format("device {} is at call #{} on this group but device {} at #{}",
                              world_.rank, number_, other, peers_[k].number);
      if (differs) return differs;
    }
    return std::nullopt;
  }

  const CallInfo& headerOf(std::size_t k) const { return *peers_[k].header; }

  // ", waiting for device 2" / ", waiting for devices 1, 3".
  std::string missingText(int stage) const {
    std::vector<int> missing;
    for (std::size_t k = 0; k < peers_.size(); ++k) {
      const Peer& peer = peers_[k];
      bool waiting = peer.headerExpected && !peer.header;
      for (std::size_t i = 0; i < peer.requests.size(); ++i)
        waiting = waiting || (peer.requests[i] != MPI_REQUEST_NULL && peer.stages[i] <= stage);
      if (waiting) missing.push_back(member(k));
    }
    if (missing.empty()) return "";
    return fmt::format(", waiting for device{} {}", missing.size() == 1 ? "" : "s",
                       fmt::join(missing, ", "));
  }

 private:
  struct Peer {
    bool headerExpected = false;
    std::optional<CallInfo> header;
    std::vector<MPI_Request> requests;
    std::vector<int> stages;
    std::vector<std::size_t> expectedBytes;
    bool wrongSize = false;
    std::uint64_t number = 0;  // the call number in its header
    std::vector<std::byte> message;  // the header's message, payload included
    std::size_t payloadAt = 0;       // where the payload starts in it
  };

  int tagOf(Groups& groups, const std::vector<int>& members) {
    // FNV-1a over the sorted members, folded into the tag bits left above
    // the call number.
    std::uint64_t hash = 1469598103934665603ull;
    for (int m : members) {
      hash ^= static_cast<std::uint32_t>(m);
      hash *= 1099511628211ull;
    }
    int bits = 0;
    while (bits < 30 && (std::int64_t(1) << (bits + 1)) - 1 <= world_.tagLimit) ++bits;
    int hashBits = bits - kCallBits;
    int slot = static_cast<int>((hash ^ (hash >> 32)) & ((std::uint64_t(1) << hashBits) - 1));
    auto [owner, added] = groups.setOfHash.emplace(slot, members);
    if (!added && owner->second != members)
      throw world_.error(Kind::Usage,
                         fmt::format("{}: the MPI tags of this group and of group {} coincide "
                                     "(hash {}); one process cannot use both",
                                     describe_, groupText(owner->second), slot));
    return (slot << kCallBits) | static_cast<int>(number_ & ((1u << kCallBits) - 1));
  }

  void receiveHeader(std::size_t k) {
    int flag = 0;
    MPI_Status status;
    MPI_Iprobe(member(k), tag_, world_.comms[kCallHeaders], &flag, &status);
    if (!flag) return;
    int length = 0;
    MPI_Get_count(&status, MPI_BYTE, &length);
    Peer& peer = peers_[k];
    peer.message.resize(static_cast<std::size_t>(length));
    checkMpi(MPI_Recv(peer.message.data(), length, MPI_BYTE, member(k), tag_,
                      world_.comms[kCallHeaders], MPI_STATUS_IGNORE),
             "MPI_Recv");
    peer.header = CallInfo::decode(peer.message, peer.number, peer.payloadAt);
  }

  MpiWorld& world_;
  CallInfo info_;
  std::uint64_t number_ = 0;
  std::string describe_;
  int tag_ = 0;
  std::size_t position_ = 0;
  std::vector<Peer> peers_;
  bool checked_ = false;
  std::shared_ptr<const void> holder_;
};

// ---- All-reduce ----

// All-reduces of at most this many bytes exchange whole operands (one
// round of messages, n - 1 times the bytes) rather than chunks (two rounds).
constexpr std::size_t kWholeBytes = 16 * 1024;

// A deterministic all-reduce under way: stage 0 (headers and the
// reduce-scatter) was posted at the start; advance() sums this member's
// chunks once stage 0 is in and sends them out (stage 1).
class AllReduceOp final : public BackgroundOp {
 public:
  AllReduceOp(MpiWorld& world, Groups& groups, CallInfo info, std::vector<Tensor> inputs)
      : world_(world), buffers_(std::make_shared<Buffers>()) {
    buffers_->inputs = std::move(inputs);
    call_ = std::make_unique<Call>(world, groups, std::move(info));
    call_->holdBuffers(buffers_);
    std::size_t n = call_->members(), me = call_->position();
    for (const Tensor& input : buffers_->inputs)
      buffers_->outputs.push_back(Tensor::uninitialized(input.dtype(), input.shape()));
    buffers_->received.resize(buffers_->inputs.size() * n);
    std::size_t total = 0;
    for (const Tensor& input : buffers_->inputs) total += input.bytes();
    whole_ = total <= kWholeBytes;
    if (whole_) {
      // Small operands travel inside the header: one message to each peer.
      std::vector<std::byte> operands;
      operands.reserve(total);
      for (const Tensor& input : buffers_->inputs) {
        auto raw = std::as_const(input).raw();
        operands.insert(operands.end(), raw.begin(), raw.end());
      }
      for (std::size_t k = 0; k < n; ++k) {
        if (k == me) continue;
        call_->sendHeader(k, operands);
        call_->expectHeader(k);
      }
      return;
    }
    for (std::size_t k = 0; k < n; ++k) {
      if (k == me) continue;
      call_->sendHeader(k);
      call_->expectHeader(k);
      for (std::size_t i = 0; i < buffers_->inputs.size(); ++i) {
        auto [begin, bytes] = chunk(i, k);
        call_->sendData(k, kCallData, std::as_const(buffers_->inputs[i]).raw().data() + begin,
                        bytes, buffers_);
        std::size_t myBytes = chunk(i, me).second;
        auto& into = buffers_->received[i * n + k];
        if (myBytes > 0) into = world.takeScratch(myBytes);
        call_->recvData(k, kCallData, into.data(), myBytes, 0);
        auto [theirs, theirBytes] = chunk(i, k);
        call_->recvData(k, kCallGather, buffers_->outputs[i].raw().data() + theirs, theirBytes, 1);
      }
    }
  }

  void advance() override {
    if (stage_ == 2 || error_) return;
    try {
      if (stage_ == 0 && call_->poll(0)) {
        sumAndSend();
        stage_ = whole_ ? 2 : 1;
      }
      if (stage_ == 1 && call_->poll(1)) stage_ = 2;
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  bool done() const override { return stage_ == 2 || error_ != nullptr; }

  void finish(std::vector<Tensor*>& tensors) {
    call_->waitFor(
        call_->describe(),
        [&] {
          advance();
          return done();
        },
        [&] { return call_->missingText(stage_); });
    if (error_) std::rethrow_exception(error_);
    for (std::size_t i = 0; i < tensors.size(); ++i) *tensors[i] = buffers_->outputs[i];
  }

 private:
  // Inputs, outputs and receive buffers: what the MPI requests read and write,
  // kept while any of them may still be in flight.
  struct Buffers {
    std::vector<Tensor> inputs;
    std::vector<Tensor> outputs;
    std::vector<Scratch> received;  // [tensor * n + member]
  };

  // Chunk k of tensor i: its first byte and its size in bytes. All of it
  // when the tensors are small: then every member sums every element, and
  // the all-reduce is one exchange instead of two.
  std::pair<std::size_t, std::size_t> chunk(std::size_t i, std::size_t k) const {
    const Tensor& t = buffers_->inputs[i];
    if (whole_) return {0, t.bytes()};
    auto elements = static_cast<std::size_t>(t.elements());
    std::size_t n = call_->members(), size = ir::dtypeBytes(t.dtype());
    std::size_t begin = chunkStart(elements, k, n), end = chunkStart(elements, k + 1, n);
    return {begin * size, (end - begin) * size};
  }

  // Where member k's part of tensor i is: this member's own input, the
  // operands in k's header (whole), or k's chunk received.
  const std::byte* partOf(std::size_t i, std::size_t k, std::size_t begin) const {
    if (k == call_->position()) return std::as_const(buffers_->inputs[i]).raw().data() + begin;
    if (!whole_) return buffers_->received[i * call_->members() + k].data();
    std::size_t offset = 0;
    for (std::size_t j = 0; j < i; ++j) offset += buffers_->inputs[j].bytes();
    return call_->payload(k).data() + offset;
  }

  // Whole operands: every peer's header carried all of them (a header that
  // agrees with this call but with other bytes is a Mismatch, as a data
  // message of another size is).
  void checkPayloads() const {
    std::size_t total = 0;
    for (const Tensor& input : buffers_->inputs) total += input.bytes();
    for (std::size_t k = 0; k < call_->members(); ++k)
      if (k != call_->position() && call_->payload(k).size() != total)
        throw world_.error(Kind::Mismatch,
                           fmt::format("{}: device {} sent a message of another size than this "
                                       "call expects",
                                       call_->describe(), call_->member(k)));
  }

  void sumAndSend() {
    std::size_t n = call_->members(), me = call_->position();
    if (whole_) checkPayloads();
    for (std::size_t i = 0; i < buffers_->inputs.size(); ++i) {
      Tensor& out = buffers_->outputs[i];
      auto [begin, bytes] = chunk(i, me);
      std::vector<const std::byte*> parts;
      for (std::size_t k = 0; k < n; ++k) parts.push_back(partOf(i, k, begin));
      std::size_t size = ir::dtypeBytes(out.dtype());
      orderedSum(out.dtype(), parts, out.raw().data() + begin, bytes / size);
      if (whole_) continue;
      for (std::size_t k = 0; k < n; ++k)
        if (k != me) call_->sendData(k, kCallGather, out.raw().data() + begin, bytes, buffers_);
    }
    // The reduce-scatter's buffers are no longer needed.
    for (auto& received : buffers_->received) world_.giveScratch(std::move(received));
  }

  MpiWorld& world_;
  std::shared_ptr<Buffers> buffers_;
  std::unique_ptr<Call> call_;
  int stage_ = 0;
  bool whole_ = false;  // small tensors: one exchange of whole operands
  std::exception_ptr error_;
};

class MpiPendingAllReduce final : public PendingAllReduce {
 public:
  MpiPendingAllReduce(std::shared_ptr<AllReduceOp> op, std::vector<Tensor*> tensors)
      : op_(std::move(op)), tensors_(std::move(tensors)) {}

  void finish() override {
    if (!op_) return;
    auto op = std::move(op_);
    op->finish(tensors_);
  }

 private:
  // Also in MpiWorld::background until done, so an all-reduce whose handle
  // is dropped still sends the other members their sums.
  std::shared_ptr<AllReduceOp> op_;
  std::vector<Tensor*> tensors_;
};

// A non-deterministic all-reduce: MPI_Iallreduce on a communicator of the group.
class MpiOwnAllReduce final : public PendingAllReduce {
 public:
  MpiOwnAllReduce(MpiWorld& world, std::string what, MPI_Comm comm, std::vector<Tensor*> tensors)
      : world_(world),
        what_(std::move(what)),
        tensors_(std::move(tensors)),
        buffers_(std::make_shared<std::vector<Tensor>>()) {
    for (Tensor* t : tensors_) {
      buffers_->push_back(t->clone());
      Tensor& sum = buffers_->back();
      MPI_Datatype type = sum.dtype() == ir::DType::F32 ? MPI_FLOAT : MPI_INT32_T;
      auto* data = sum.raw().data();
      auto count = static_cast<std::size_t>(sum.elements());
      std::size_t size = ir::dtypeBytes(sum.dtype()), step = kPieceBytes / size;
      for (std::size_t at = 0; at < count; at += step) {
        MPI_Request request;
        checkMpi(MPI_Iallreduce(MPI_IN_PLACE, data + at * size,
                                static_cast<int>(std::min(step, count - at)), type, MPI_SUM, comm,
                                &request),
                 "MPI_Iallreduce");
        requests_.push_back(request);
      }
    }
    ++world_.mpiCollectivesUnderWay;
  }

  // A collective's requests cannot be cancelled: they stay until MPI ends them.
  ~MpiOwnAllReduce() override {
    if (!requests_.empty()) --world_.mpiCollectivesUnderWay;
    world_.abandon(requests_, buffers_, false);
  }

  void finish() override {
    world_.await(
        what_, world_.options.timeout,
        [&] {
          int flag = 0;
          checkMpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag,
                               MPI_STATUSES_IGNORE),
                   "MPI_Testall");
          return flag != 0;
        },
        [] { return std::string(); });
    requests_.clear();
    --world_.mpiCollectivesUnderWay;
    for (std::size_t i = 0; i < tensors_.size(); ++i) *tensors_[i] = (*buffers_)[i];
  }

 private:
  MpiWorld& world_;
  std::string what_;
  std::vector<Tensor*> tensors_;
  std::shared_ptr<std::vector<Tensor>> buffers_;
  std::vector<MPI_Request> requests_;
};

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
    std::string what = fmt::format("send to device {} (tag {})", peer, tag);
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
    for (const Tensor& t : *tensors) TensorType::of(t).write(header);
    auto bytes = std::make_shared<const std::vector<std::byte>>(header.take());
    world_.postSend(kMessageHeaders, peer, 0, bytes->data(), bytes->size(), bytes);
    for (const Tensor& t : *tensors)
      if (t.allocated() && t.bytes() > 0)
        world_.postSend(kMessagePayloads, peer, payloadTag(nextPayload_[peer]++), t.raw().data(),
                        t.bytes(), tensors);
  }

  std::vector<Tensor> recv(int peer, std::uint64_t tag) override {
    std::string what = fmt::format("recv from device {} (tag {})", peer, tag);
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
    CallInfo call = checkedCall(Op::AllReduce, group);
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i] || !tensors[i]->allocated())
        throw usage(fmt::format("{}: tensor {} is unallocated", plainCall(call), i));
      inputs.push_back(*tensors[i]);
      call.types.push_back(TensorType::of(*tensors[i]));
    }
    if (!world_.options.deterministic && mpiCanSum(inputs)) {
      // Numbered as the others, so that later calls keep the cpu backend's numbers.
      std::vector<int> members = group;
      std::sort(members.begin(), members.end());
      std::string what = fmt::format("allReduce #{} over group {} (MPI_Iallreduce)",
                                     groups_.nextCall[members]++, groupText(group));
      world_.throwIfAborted(what);
      return std::make_unique<MpiOwnAllReduce>(world_, what, reduceComm(group), std::move(tensors));
    }
    auto op = std::make_shared<AllReduceOp>(world_, groups_, std::move(call), std::move(inputs));
    world_.background.push_back(op);
    return std::make_unique<MpiPendingAllReduce>(std::move(op), std::move(tensors));
  }

  void allGather(const std::vector<int>& group, const Tensor& input, Tensor& output) override {
    Call call(world_, groups_, withSlicedInput(Op::AllGather, group, input, 1));
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
    Call call(world_, groups_, withSlicedInput(Op::ReduceScatter, group, input, group.size()));
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
    Call call(world_, groups_, withSlicedInput(Op::AllToAll, group, input, group.size()));
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
    CallInfo info = checkedCall(Op::Broadcast, group);
    info.root = root;
    info.operandsAgree = false;
    if (std::find(group.begin(), group.end(), root) == group.end())
      throw usage(plainCall(info) + ": the root is not a member");
    if (root == world_.rank) {
      if (!tensor.allocated()) throw usage(plainCall(info) + ": the root's tensor is unallocated");
      info.types.push_back(TensorType::of(tensor));
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
    const TensorType& type = call.headerOf(from).types.at(0);
    if (tensor.allocated() && TensorType::of(tensor) != type)
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
    Call call(world_, groups_, checkedCall(Op::Barrier, group));
    for (std::size_t k = 0; k < call.members(); ++k)
      if (k != call.position()) exchangeHeaders(call, k);
    call.wait(0);
  }

 private:
  CommError usage(std::string detail) const { return world_.error(Kind::Usage, std::move(detail)); }

  void checkDevice(int device, const std::string& what) const {
    if (device < 0 || device >= deviceCount())
      throw usage(fmt::format("{}: there is no device {} (the cluster has {})", what, device,
                              deviceCount()));
  }

  static std::string plainCall(const CallInfo& call) {
    return fmt::format("{} over group {}", opName(call.op), groupText(call.group));
  }

  CallInfo checkedCall(Op op, const std::vector<int>& group) const {
    CallInfo call;
    call.op = op;
    call.group = group;
    std::vector<bool> listed(static_cast<std::size_t>(deviceCount()), false);
    for (int member : group) {
      checkDevice(member, plainCall(call));
      if (listed[member])
        throw usage(fmt::format("{}: device {} is listed twice", plainCall(call), member));
      listed[member] = true;
    }
    if (!listed[world_.rank])
      throw usage(fmt::format("{}: device {} is not a member", plainCall(call), world_.rank));
    return call;
  }

  CallInfo withSlicedInput(Op op, const std::vector<int>& group, const Tensor& input,
                           std::size_t parts) const {
    CallInfo call = checkedCall(op, group);
    if (!input.allocated()) throw usage(plainCall(call) + ": the input is unallocated");
    if (input.rank() == 0)
      throw usage(fmt::format("{}: the input {} has no axis 0", plainCall(call), input.typeText()));
    if (input.dim(0) % static_cast<std::int64_t>(parts) != 0)
      throw usage(fmt::format("{}: dim 0 of {} does not split into {} equal slices",
                              plainCall(call), input.typeText(), parts));
    call.types.push_back(TensorType::of(input));
    return call;
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
        TensorType type = TensorType::read(r);
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
