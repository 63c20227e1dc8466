#include "runtime/cpu/LocalCluster.h"

#include "runtime/CallSignature.h"
#include "runtime/cpu/KernelCollectives.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <compare>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>

namespace meshflow::runtime::cpu {
namespace {

using Clock = std::chrono::steady_clock;
using Kind = CommError::Kind;

// "60 s" for whole seconds, else "100 ms".
std::string durationText(std::chrono::milliseconds duration) {
  if (duration.count() > 0 && duration.count() % 1000 == 0)
    return fmt::format("{} s", duration.count() / 1000);
  return fmt::format("{} ms", duration.count());
}

// ---- Element ranges of tensors (row-major offsets; both tensors of one dtype) ----

void copyRange(const Tensor& from, std::size_t fromOffset, Tensor& to, std::size_t toOffset,
               std::size_t count) {
  const std::size_t size = ir::dtypeBytes(from.dtype());
  std::copy_n(from.raw().begin() + fromOffset * size, count * size, to.raw().begin() + toOffset * size);
}

// to[i] += from[fromOffset + i]. i32 sums wrap modulo 2^32: adding as unsigned
// keeps an overflow defined behaviour.
void addRange(const Tensor& from, std::size_t fromOffset, Tensor& to, std::size_t count) {
  if (from.dtype() == ir::DType::F32) {
    auto x = from.f32().subspan(fromOffset, count);
    auto y = to.f32();
    for (std::size_t i = 0; i < count; ++i) y[i] += x[i];
    return;
  }
  // Half partial sums add in f32 and round once per addition, as a half
  // all-reduce on a GPU does.
  if (from.dtype() == ir::DType::BF16) {
    auto x = from.bf16().subspan(fromOffset, count);
    auto y = to.bf16();
    for (std::size_t i = 0; i < count; ++i) y[i] = toBFloat16(fromBFloat16(y[i]) + fromBFloat16(x[i]));
    return;
  }
  if (from.dtype() == ir::DType::F16) {
    auto x = from.f16().subspan(fromOffset, count);
    auto y = to.f16();
    for (std::size_t i = 0; i < count; ++i) y[i] = toHalf(fromHalf(y[i]) + fromHalf(x[i]));
    return;
  }
  auto x = from.i32().subspan(fromOffset, count);
  auto y = to.i32();
  for (std::size_t i = 0; i < count; ++i)
    y[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(y[i]) +
                                     static_cast<std::uint32_t>(x[i]));
}

// The elements from `offset` of the sum of `inputs`, as a tensor of `shape`. The
// sum is ((x0 + x1) + x2) + ... in the order of `inputs`, so every member that
// computes it gets the same bits.
Tensor orderedSum(const std::vector<const Tensor*>& inputs, std::size_t offset, Shape shape) {
  Tensor sum(inputs[0]->dtype(), std::move(shape));
  auto count = static_cast<std::size_t>(sum.elements());
  copyRange(*inputs[0], offset, sum, 0, count);
  for (std::size_t k = 1; k < inputs.size(); ++k) addRange(*inputs[k], offset, sum, count);
  return sum;
}

// `shape` with dim 0 divided into `parts`.
Shape sliceShape(Shape shape, std::size_t parts) {
  shape[0] /= static_cast<std::int64_t>(parts);
  return shape;
}

// ---- The shared state ----

struct MailboxKey {
  int from;
  int to;
  std::uint64_t tag;
  auto operator<=>(const MailboxKey&) const = default;
};

// One member's side of a collective: what it called and a copy of its operands.
struct Contribution {
  CallSignature call;
  std::vector<Tensor> tensors;

  void add(const Tensor& operand) {
    tensors.push_back(operand);
    call.operands.push_back(OperandType::of(operand));
  }
};

// A collective is identified by its members as a set and by how many collectives
// each member has called on that set before. Keying by the set rather than the
// list turns a group given in different orders into a Mismatch instead of a hang.
struct CallKey {
  std::vector<int> members;  // sorted
  std::uint64_t number = 0;
  auto operator<=>(const CallKey&) const = default;
};

struct Rendezvous {
  std::map<int, Contribution> arrived;  // by device
  std::size_t departed = 0;
};

}  // namespace

// Everything the devices share, under one mutex. Each device waits on its own
// condition variable; whoever can end its wait (a sender, the last member to
// arrive at a collective, abort) notifies it.
struct LocalWorld {
  explicit LocalWorld(LocalClusterOptions options)
      : options(options), cores(options.cores, options.devices), wakeups(options.devices), nextCall(options.devices) {}

  const LocalClusterOptions options;
  CoreGate cores;
  mutable std::mutex mutex;
  std::vector<std::condition_variable> wakeups;
  bool aborted = false;
  std::string abortReason;
  std::map<MailboxKey, std::deque<std::vector<Tensor>>> mailboxes;  // no empty queues
  std::map<CallKey, Rendezvous> calls;
  std::vector<std::map<std::vector<int>, std::uint64_t>> nextCall;  // per device, by member set

  void abort(const std::string& reason) {
    {
      std::lock_guard lock(mutex);
      if (aborted) return;
      aborted = true;
      abortReason = reason;
    }
    for (auto& wakeup : wakeups) wakeup.notify_all();
  }

  // Called with the mutex held.
  void throwIfAborted(int device, const std::string& what) const {
    if (aborted) throw CommError(Kind::Aborted, device, what + ": aborted: " + abortReason);
  }

  // Blocks `device` (the mutex held through `lock`) until ready() holds. Throws
  // CommError when the cluster is aborted first or the timeout passes; missing()
  // says what a timed-out wait still lacked and is asked only then. A wait that
  // became ready before the abort succeeds: in a collective whose members have all
  // arrived, every member must go on to the same outcome (a result or a Mismatch).
  template <class Ready, class Missing>
  void await(std::unique_lock<std::mutex>& lock, int device, const std::string& what, Ready ready,
             Missing missing) {
    auto deadline = Clock::now() + options.timeout;
    wakeups[device].wait_until(lock, deadline, [&] { return aborted || ready(); });
    if (ready()) return;
    throwIfAborted(device, what);
    throw CommError(
        Kind::Timeout, device,
        fmt::format("{} timed out after {}{}", what, durationText(options.timeout), missing()));
  }

  void post(int from, int to, std::uint64_t tag, std::vector<Tensor> message) {
    {
      std::lock_guard lock(mutex);
      throwIfAborted(from, fmt::format("send to device {} (tag {})", to, tag));
      mailboxes[{from, to, tag}].push_back(std::move(message));
    }
    wakeups[to].notify_all();
  }

  std::vector<Tensor> take(int to, int from, std::uint64_t tag) {
    std::string what = fmt::format("recv from device {} (tag {})", from, tag);
    MailboxKey key{from, to, tag};
    std::unique_lock lock(mutex);
    throwIfAborted(to, what);
    await(
        lock, to, what, [&] { return mailboxes.contains(key); }, [] { return std::string(); });
    auto queue = mailboxes.find(key);
    std::vector<Tensor> message = std::move(queue->second.front());
    queue->second.pop_front();
    if (queue->second.empty()) mailboxes.erase(queue);
    return message;
  }
};

namespace {

// A member's part in one collective. The constructor deposits its contribution;
// wait() waits for every other member's and checks that they all called the same
// thing; the destructor leaves, and the last member to leave frees the rendezvous.
// Once every member has arrived the contributions are never written again, so the
// members read them without the lock.
class Meeting {
 public:
  Meeting(LocalWorld& world, int device, Contribution mine)
      : world_(world), device_(device), group_(mine.call.group) {
    std::lock_guard lock(world_.mutex);
    std::vector<int> members = group_;
    std::sort(members.begin(), members.end());
    std::uint64_t number = world_.nextCall[device][members]++;
    call_ = mine.call.describe(number);
    world_.throwIfAborted(device, call_);
    key_ = {std::move(members), number};
    rendezvous_ = &world_.calls[key_];
    rendezvous_->arrived.emplace(device, std::move(mine));
    if (complete())
      for (int member : group_) world_.wakeups[member].notify_all();
  }

  ~Meeting() {
    std::lock_guard lock(world_.mutex);
    if (++rendezvous_->departed == group_.size()) world_.calls.erase(key_);
  }

  Meeting(const Meeting&) = delete;
  Meeting& operator=(const Meeting&) = delete;

  void wait() {
    {
      CoreGate::Yield waiting(&world_.cores, device_);
      std::unique_lock lock(world_.mutex);
      world_.await(
          lock, device_, call_, [&] { return complete(); }, [&] { return missingText(); });
    }
    checkAgreement();
  }

  const std::string& call() const { return call_; }
  const Contribution& of(int device) const { return rendezvous_->arrived.at(device); }
  std::size_t position() const {
    return static_cast<std::size_t>(std::find(group_.begin(), group_.end(), device_) -
                                    group_.begin());
  }

  // The index-th operand of each member, in group order.
  std::vector<const Tensor*> operands(std::size_t index) const {
    std::vector<const Tensor*> result;
    for (int member : group_) result.push_back(&of(member).tensors[index]);
    return result;
  }

 private:
  bool complete() const { return rendezvous_->arrived.size() == group_.size(); }

  // ", waiting for device 2" / ", waiting for devices 1, 3"; called with the lock held.
  std::string missingText() const {
    std::vector<int> missing;
    for (int member : group_)
      if (!rendezvous_->arrived.contains(member)) missing.push_back(member);
    return fmt::format(", waiting for device{} {}", missing.size() == 1 ? "" : "s",
                       fmt::join(missing, ", "));
  }

  // Compares this member's call with every other's. If any two members disagree,
  // every member disagrees with someone, so all of them throw.
  void checkAgreement() const {
    const Contribution& mine = of(device_);
    bool mineFirst = false;  // whether this member comes before `other` in group order
    for (int other : group_) {
      if (other == device_) {
        mineFirst = true;
        continue;
      }
      auto differs = mineFirst ? callDifference(device_, mine.call, other, of(other).call)
                               : callDifference(other, of(other).call, device_, mine.call);
      if (differs) throw CommError(Kind::Mismatch, device_, call_ + ": " + *differs);
    }
  }

  LocalWorld& world_;
  int device_;
  std::vector<int> group_;
  CallKey key_;
  Rendezvous* rendezvous_ = nullptr;
  std::string call_;
};

class LocalAllReduce final : public PendingAllReduce {
 public:
  LocalAllReduce(std::unique_ptr<Meeting> meeting, std::vector<Tensor*> tensors)
      : meeting_(std::move(meeting)), tensors_(std::move(tensors)) {}

  void finish() override {
    if (!meeting_) return;
    meeting_->wait();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      auto inputs = meeting_->operands(i);
      *tensors_[i] = collectivesOnKernels(inputs) ? kernelSum(inputs) : orderedSum(inputs, 0, inputs[0]->shape());
    }
    meeting_.reset();
  }

 private:
  std::unique_ptr<Meeting> meeting_;
  std::vector<Tensor*> tensors_;
};

// One device's Communicator: checks its own arguments, then meets its peers.
class Endpoint final : public Communicator {
 public:
  Endpoint(LocalWorld& world, int device) : world_(world), device_(device) {}

  int device() const override { return device_; }
  int deviceCount() const override { return world_.options.devices; }

  void send(int peer, std::uint64_t tag, std::vector<Tensor> message) override {
    checkDevice(peer, fmt::format("send to device {} (tag {})", peer, tag));
    world_.post(device_, peer, tag, std::move(message));
  }

  std::vector<Tensor> recv(int peer, std::uint64_t tag) override {
    checkDevice(peer, fmt::format("recv from device {} (tag {})", peer, tag));
    CoreGate::Yield waiting(&world_.cores, device_);
    return world_.take(device_, peer, tag);
  }

  void allReduce(const std::vector<int>& group, std::vector<Tensor*> tensors) override {
    startAllReduce(group, std::move(tensors))->finish();
  }

  // The contribution is deposited now (shared copies of the tensors, which the
  // caller leaves unwritten); finish() meets the others and sums in group order.
  std::unique_ptr<PendingAllReduce> startAllReduce(const std::vector<int>& group,
                                                   std::vector<Tensor*> tensors) override {
    Contribution mine = checkedCall("allReduce", group);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (!tensors[i] || !tensors[i]->allocated())
        throw usage(fmt::format("{}: tensor {} is unallocated", mine.call.plain(), i));
      mine.add(*tensors[i]);
    }
    return std::make_unique<LocalAllReduce>(std::make_unique<Meeting>(world_, device_, std::move(mine)),
                                            std::move(tensors));
  }

  void allGather(const std::vector<int>& group, const Tensor& input, Tensor& output) override {
    Meeting meeting(world_, device_, withSlicedInput("allGather", group, input, 1));
    meeting.wait();
    auto inputs = meeting.operands(0);
    if (collectivesOnKernels(inputs)) {
      output = kernelConcat(inputs);
      return;
    }
    Shape shape = inputs[0]->shape();
    shape[0] *= static_cast<std::int64_t>(inputs.size());
    Tensor gathered(inputs[0]->dtype(), std::move(shape));
    auto count = static_cast<std::size_t>(inputs[0]->elements());
    for (std::size_t k = 0; k < inputs.size(); ++k)
      copyRange(*inputs[k], 0, gathered, k * count, count);
    output = std::move(gathered);
  }

  void reduceScatter(const std::vector<int>& group, const Tensor& input, Tensor& output) override {
    Meeting meeting(world_, device_, withSlicedInput("reduceScatter", group, input, group.size()));
    meeting.wait();
    auto inputs = meeting.operands(0);
    if (collectivesOnKernels(inputs)) {
      output = kernelSliceSum(inputs, meeting.position(), inputs.size());
      return;
    }
    Shape slice = sliceShape(inputs[0]->shape(), inputs.size());
    auto count = static_cast<std::size_t>(shapeElements(slice));
    output = orderedSum(inputs, meeting.position() * count, std::move(slice));
  }

  void allToAll(const std::vector<int>& group, const Tensor& input, Tensor& output) override {
    Meeting meeting(world_, device_, withSlicedInput("allToAll", group, input, group.size()));
    meeting.wait();
    auto inputs = meeting.operands(0);
    if (collectivesOnKernels(inputs)) {
      output = kernelExchange(inputs, meeting.position(), inputs.size());
      return;
    }
    Tensor exchanged(inputs[0]->dtype(), inputs[0]->shape());
    auto count = static_cast<std::size_t>(exchanged.elements()) / inputs.size();
    std::size_t from = meeting.position() * count;
    for (std::size_t k = 0; k < inputs.size(); ++k)
      copyRange(*inputs[k], from, exchanged, k * count, count);
    output = std::move(exchanged);
  }

  void broadcast(const std::vector<int>& group, int root, Tensor& tensor) override {
    Contribution mine = checkedCall("broadcast", group);
    mine.call.root = root;
    mine.call.operandsAgree = false;
    if (std::find(group.begin(), group.end(), root) == group.end())
      throw usage(mine.call.plain() + ": the root is not a member");
    if (root == device_) {
      if (!tensor.allocated()) throw usage(mine.call.plain() + ": the root's tensor is unallocated");
      mine.add(tensor);
    }
    Meeting meeting(world_, device_, std::move(mine));
    meeting.wait();
    if (root == device_) return;
    const Tensor& value = meeting.of(root).tensors[0];
    if (tensor.allocated() && tensor.typeText() != value.typeText())
      throw CommError(
          Kind::Mismatch, device_,
          fmt::format("{}: the tensor is {} on device {} but {} on device {}", meeting.call(),
                      value.typeText(), root, tensor.typeText(), device_));
    tensor = value;
  }

  void barrier(const std::vector<int>& group) override {
    Meeting meeting(world_, device_, checkedCall("barrier", group));
    meeting.wait();
  }

 private:
  CommError usage(std::string detail) const {
    return CommError(Kind::Usage, device_, std::move(detail));
  }

  void checkDevice(int device, const std::string& what) const {
    if (device < 0 || device >= deviceCount())
      throw usage(fmt::format("{}: there is no device {} (the cluster has {})", what, device,
                              deviceCount()));
  }

  // A contribution to `op` on `group`, once the group is known to be valid.
  Contribution checkedCall(std::string op, const std::vector<int>& group) const {
    return {runtime::checkedCall(std::move(op), group, device_, deviceCount()), {}};
  }

  // A contribution of `input`, whose dim 0 must split into `parts` equal slices.
  Contribution withSlicedInput(std::string op, const std::vector<int>& group, const Tensor& input,
                               std::size_t parts) const {
    return {slicedInputCall(std::move(op), group, device_, deviceCount(), input, parts), {input}};
  }

  LocalWorld& world_;
  int device_;
};

// The failures of one run(), in the order they were recorded.
class FailureLog {
 public:
  explicit FailureLog(LocalWorld& world) : world_(world) {}

  // Records a body's exception and aborts the cluster under one lock, so the
  // abort's reason is always the failure recorded first.
  void record(int device, std::exception_ptr error) {
    std::lock_guard lock(mutex_);
    failures_.push_back(describe(device, std::move(error)));
    const Failure& failure = failures_.back();
    world_.abort(fmt::format("device {} failed: {}", failure.device, failure.detail));
  }

  // Throws DeviceFailure for the first failure that is not a consequence of an
  // abort, else for the first one; returns when there was none.
  void rethrowFirst() const {
    std::lock_guard lock(mutex_);
    if (failures_.empty()) return;
    auto first = std::find_if(failures_.begin(), failures_.end(),
                              [](const Failure& f) { return !f.causedByAbort; });
    if (first == failures_.end()) first = failures_.begin();
    throw DeviceFailure(first->device, first->detail, first->error);
  }

 private:
  struct Failure {
    int device;
    std::string detail;
    bool causedByAbort;
    std::exception_ptr error;
  };

  static Failure describe(int device, std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const CommError& e) {
      return {device, e.device() == device ? e.detail() : e.what(), e.kind() == Kind::Aborted,
              error};
    } catch (const std::exception& e) {
      return {device, e.what(), false, error};
    } catch (...) {
      return {device, "an exception that is not a std::exception", false, error};
    }
  }

  LocalWorld& world_;
  mutable std::mutex mutex_;
  std::vector<Failure> failures_;
};

}  // namespace

DeviceFailure::DeviceFailure(int device, std::string detail, std::exception_ptr cause)
    : std::runtime_error(fmt::format("device {} failed: {}", device, detail)),
      device_(device),
      detail_(std::move(detail)),
      cause_(std::move(cause)) {}

LocalCluster::LocalCluster(LocalClusterOptions options) {
  if (options.devices < 1)
    throw std::invalid_argument(
        fmt::format("a local cluster needs at least one device, not {}", options.devices));
  if (options.timeout.count() <= 0)
    throw std::invalid_argument(fmt::format("the communication timeout must be positive, not {}",
                                            durationText(options.timeout)));
  world_ = std::make_unique<LocalWorld>(options);
  for (int device = 0; device < options.devices; ++device)
    endpoints_.push_back(std::make_unique<Endpoint>(*world_, device));
  threads_ = std::make_unique<DeviceThreads>(options.devices);
}

LocalCluster::~LocalCluster() = default;

int LocalCluster::deviceCount() const { return world_->options.devices; }

Communicator& LocalCluster::communicator(int device) {
  if (device < 0 || device >= deviceCount())
    throw std::out_of_range(
        fmt::format("no device {} in a local cluster of {}", device, deviceCount()));
  return *endpoints_[static_cast<std::size_t>(device)];
}

CoreGate* LocalCluster::cores() { return &world_->cores; }

void LocalCluster::abort(const std::string& reason) { world_->abort(reason); }

bool LocalCluster::aborted() const {
  std::lock_guard lock(world_->mutex);
  return world_->aborted;
}

void LocalCluster::run(const std::function<void(int device)>& body) {
  FailureLog failures(*world_);
  auto runDevice = [&](int device) {
    try {
      CoreGate::Hold core(&world_->cores, device);
      body(device);
    } catch (...) {
      failures.record(device, std::current_exception());
    }
  };
  world_->cores.lineUp();
  try {
    threads_->run(runDevice);
  } catch (...) {
    abort("a device thread could not be started");
    throw;
  }
  failures.rethrowFirst();
}

}  // namespace meshflow::runtime::cpu
