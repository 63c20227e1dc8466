#include "runtime/sim/Simulator.h"

#include <algorithm>
#include <queue>

#include "runtime/sim/SimErrors.h"
#include "runtime/sim/StepMeasures.h"
#include "runtime/sim/StreamQueues.h"

namespace meshflow::runtime::sim {
namespace {

using ir::Instruction;
using ir::Opcode;

constexpr uint8_t kNothing = 0xff;  // StreamState::waitSource of a stream that waits for no input

struct StreamState {
  uint32_t cursor = 0;     // the next op of the stream's queue
  uint32_t firstWait = 0;  // its first wait in the queue's waits
  // How many waits of the op under the cursor are known met, and the latest of their
  // ready times, so that a retry (an UPDATE waiting for hundreds of gradient
  // buckets) does not check them again.
  uint32_t metWaits = 0;
  double readyBy = 0;
  double free = 0;  // when the stream is next free
  // The input it sleeps on, as in Wait: op waitPosition of the device's stream
  // waitSource, or its RECV waitPosition.
  uint32_t waitPosition = 0;
  uint8_t waitSource = kNothing;
  bool atCollective = false;  // arrived at the collective under the cursor
  bool atCore = false;        // the compute op under the cursor waits for a host core
  bool queued = false;
};

// A device's RECVs: whether each is complete, and when its data arrived.
struct Arrivals {
  std::vector<bool> done;
  std::vector<double> time;
};

// A collective instance in progress on one group: who has arrived, and when.
struct PendingCollective {
  double latestArrival = 0;
  std::vector<uint32_t> arrived;  // stream slots, in order of arrival
};

// A compute op that is ready and waits for a host core; the earliest ready is
// served first, ties by device (then stream slot: one per device anyway).
struct CoreRequest {
  double ready = 0;
  uint32_t slot = 0;

  bool operator>(const CoreRequest& other) const {
    return ready != other.ready ? ready > other.ready : slot > other.slot;
  }
};

// Runs the stream queues as a discrete-event simulation driven by dependencies: a
// stream runs until an op must wait, then sleeps until what it waits for happens
// (an op of another stream of its device, a RECV, the last member's arrival at a
// collective), so no op is looked at more than a few times. Times depend only on
// the program, never on the order streams are woken in; the woken streams form a
// stack, so that the run follows the data from device to device and finds each
// device's state still in cache.
class Engine {
 public:
  Engine(const ir::Program& program, const SimulatorOptions& options,
         std::vector<DeviceQueues> queues)
      : program_(program),
        options_(options),
        queues_(std::move(queues)),
        streams_(program.devices.size() * kStreams),
        arrivals_(program.devices.size()),
        pending_(program.groups.size()) {
    for (size_t d = 0; d < queues_.size(); ++d) {
      arrivals_[d].done.assign(queues_[d].recvs.size(), false);
      arrivals_[d].time.assign(queues_[d].recvs.size(), 0);
    }
    result_.computeBusy.assign(program.devices.size(), 0);
    if (options_.recordTimeline) result_.timeline.resize(program.devices.size());
    if (options_.hostCores > 0 && static_cast<size_t>(options_.hostCores) < program.devices.size())
      coreFree_.assign(static_cast<size_t>(options_.hostCores), 0);
  }

  // With shared cores, the woken streams run until every stream waits; then the
  // earliest-ready compute op takes the core that frees first, and its
  // consequences run in turn. Nothing that happens later can be ready earlier:
  // every op not yet known to be ready waits, through its inputs, for a compute
  // op still queued, which cannot start before the one served now.
  SimulationResult run() {
    for (auto slot = static_cast<uint32_t>(streams_.size()); slot-- > 0;) enqueue(slot);
    for (;;) {
      runWoken();
      if (coreQueue_.empty()) break;
      serveCore();
    }
    reportDeadlock();
    finish();
    return std::move(result_);
  }

 private:
  // A stream slot is device * kStreams + stream.
  static uint32_t slotOf(int device, int stream) {
    return static_cast<uint32_t>(device) * kStreams + static_cast<uint32_t>(stream);
  }
  static int deviceOf(uint32_t slot) { return static_cast<int>(slot / kStreams); }
  static int streamOf(uint32_t slot) { return static_cast<int>(slot % kStreams); }

  StreamQueue& queueOf(uint32_t slot) { return queues_[slot / kStreams].streams[slot % kStreams]; }
  const StreamQueue& queueOf(uint32_t slot) const {
    return queues_[slot / kStreams].streams[slot % kStreams];
  }
  const StreamOp& opAt(uint32_t slot) const { return queueOf(slot).ops[streams_[slot].cursor]; }
  const Instruction& instructionAt(uint32_t slot) const {
    return program_.devices[slot / kStreams].code[opAt(slot).index];
  }

  void runWoken() {
    while (!woken_.empty()) {
      const uint32_t slot = woken_.back();
      woken_.pop_back();
      streams_[slot].queued = false;
      while (step(slot)) {
      }
    }
  }

  // The earliest-ready compute op waiting for a core runs on the core that
  // frees first.
  void serveCore() {
    const CoreRequest request = coreQueue_.top();
    coreQueue_.pop();
    auto core = std::min_element(coreFree_.begin(), coreFree_.end());
    // A device that waited for the core is handed it when it frees, and
    // starts once woken.
    const double start = request.ready < *core ? *core + options_.coreHandoff : request.ready;
    const double time = opAt(request.slot).time;
    *core = start + time;
    streams_[request.slot].atCore = false;
    runCompute(request.slot, start, time);
    enqueue(request.slot);
  }

  void runCompute(uint32_t slot, double start, double time) {
    result_.computeBusy[static_cast<size_t>(deviceOf(slot))] += time;
    finishOp(slot, start, start + time);
  }

  void enqueue(uint32_t slot) {
    StreamState& state = streams_[slot];
    if (state.queued) return;
    state.queued = true;
    woken_.push_back(slot);
  }

  // Runs the op under `slot`'s cursor if it can run now; false when the stream is
  // finished or must wait.
  bool step(uint32_t slot) {
    StreamState& state = streams_[slot];
    const StreamQueue& queue = queueOf(slot);
    if (state.cursor >= queue.ops.size() || state.atCollective || state.atCore) return false;
    const StreamOp& op = queue.ops[state.cursor];
    if (!waitsMet(slot, queue)) return false;
    const double start = std::max(state.free, state.readyBy);
    const double end = start + op.time;
    switch (op.op) {
      case Opcode::kRun:
      case Opcode::kUpdate:
        if (!coreFree_.empty()) {
          state.atCore = true;
          coreQueue_.push({start, slot});
          return false;
        }
        runCompute(slot, start, op.time);
        return true;
      case Opcode::kSend: {
        const int peer = op.peer;
        const uint32_t delivery = op.delivery;
        finishOp(slot, start, end);
        deliver(peer, delivery, start, end);
        return true;
      }
      default:
        return arriveAtCollective(slot, op, start);
    }
  }

  // Whether every wait of the op under the cursor is met; resumes from the waits
  // found met on an earlier try, and on an unmet one sleeps on it.
  bool waitsMet(uint32_t slot, const StreamQueue& queue) {
    StreamState& state = streams_[slot];
    const uint16_t count = queue.ops[state.cursor].waitCount;
    for (; state.metWaits < count; ++state.metWaits) {
      const Wait& wait = queue.waits[state.firstWait + state.metWaits];
      double ready = 0;
      if (!isReady(deviceOf(slot), wait, ready)) {
        state.waitSource = wait.source;
        state.waitPosition = wait.position;
        return false;
      }
      state.readyBy = std::max(state.readyBy, ready);
    }
    return true;
  }

  // Whether the input of `wait` on `device` is ready, and if so since when.
  bool isReady(int device, const Wait& wait, double& time) const {
    if (wait.source == kRecvSource) {
      const Arrivals& arrivals = arrivals_[static_cast<size_t>(device)];
      time = arrivals.time[wait.position];
      return arrivals.done[wait.position];
    }
    const uint32_t source = slotOf(device, wait.source);
    if (streams_[source].cursor <= wait.position) return false;
    time = queueOf(source).ops[wait.position].time;  // its end, once it has run
    return true;
  }

  // Wakes the streams of `device` that sleep on input `position` of `source` (or,
  // from a stream, on any op before `position`).
  void wake(int device, uint8_t source, uint32_t position) {
    for (int stream = 0; stream < kStreams; ++stream) {
      StreamState& state = streams_[slotOf(device, stream)];
      if (state.waitSource != source) continue;
      if (source == kRecvSource ? state.waitPosition != position : state.waitPosition >= position) {
        continue;
      }
      state.waitSource = kNothing;
      enqueue(slotOf(device, stream));
    }
  }

  void record(int device, uint32_t index, double start, double end) {
    if (options_.recordTimeline) {
      result_.timeline[static_cast<size_t>(device)].push_back({index, start, end});
    }
    result_.makespan = std::max(result_.makespan, end);
  }

  // The op under `slot`'s cursor ran from `start` to `end`: its outputs are ready.
  void finishOp(uint32_t slot, double start, double end) {
    StreamState& state = streams_[slot];
    StreamOp& op = queueOf(slot).ops[state.cursor];
    record(deviceOf(slot), op.index, start, end);
    op.time = end;
    state.free = end;
    state.firstWait += op.waitCount;
    state.metWaits = 0;
    state.readyBy = 0;
    ++state.cursor;
    wake(deviceOf(slot), static_cast<uint8_t>(streamOf(slot)), state.cursor);
  }

  // The SEND's data has crossed the link at `end`: the peer's RECV `number` is
  // complete and the buffer it defines is ready.
  void deliver(int peer, uint32_t number, double start, double end) {
    Arrivals& arrivals = arrivals_[static_cast<size_t>(peer)];
    arrivals.done[number] = true;
    arrivals.time[number] = end;
    wake(peer, kRecvSource, number);
    if (options_.recordTimeline) {
      record(peer, queues_[static_cast<size_t>(peer)].recvs[number], start, end);
    }
  }

  bool arriveAtCollective(uint32_t slot, const StreamOp& op, double start) {
    PendingCollective& pending = pending_[static_cast<size_t>(op.peer)];
    if (!pending.arrived.empty()) requireSameCollective(pending.arrived.front(), slot);
    streams_[slot].atCollective = true;
    pending.latestArrival = std::max(pending.latestArrival, start);
    pending.arrived.push_back(slot);
    const std::vector<int>& group = program_.groups[static_cast<size_t>(op.peer)];
    if (pending.arrived.size() < group.size()) return false;
    completeCollective(pending, pending.latestArrival + op.time);
    return true;
  }

  void requireSameCollective(uint32_t firstSlot, uint32_t slot) const {
    const Instruction& first = instructionAt(firstSlot);
    const Instruction& mine = instructionAt(slot);
    if (first.op == mine.op && first.bytes == mine.bytes) return;
    throw SimulationError(collectiveMismatchMessage(program_, mine.peer, deviceOf(firstSlot),
                                                    opAt(firstSlot).index, deviceOf(slot),
                                                    opAt(slot).index));
  }

  void completeCollective(PendingCollective& pending, double end) {
    const double start = pending.latestArrival;
    for (uint32_t member : pending.arrived) {
      streams_[member].atCollective = false;
      finishOp(member, start, end);
      enqueue(member);
    }
    pending.arrived.clear();
    pending.latestArrival = 0;
  }

  BlockedStream blockedStream(uint32_t slot) const {
    BlockedStream blocked;
    blocked.device = deviceOf(slot);
    blocked.index = opAt(slot).index;
    const Instruction& in = instructionAt(slot);
    const StreamQueue& queue = queueOf(slot);
    for (uint32_t k = 0; k < opAt(slot).waitCount; ++k) {
      const Wait& wait = queue.waits[streams_[slot].firstWait + k];
      double time = 0;
      if (isReady(blocked.device, wait, time)) continue;
      blocked.waitsForBuffer = true;
      blocked.buffer = program_.devices[slot / kStreams].uses(in)[wait.operand];
      return blocked;
    }
    const std::vector<uint32_t>& arrived = pending_[static_cast<size_t>(in.peer)].arrived;
    for (int member : program_.groups[static_cast<size_t>(in.peer)]) {
      const bool joined = std::any_of(arrived.begin(), arrived.end(),
                                      [&](uint32_t other) { return deviceOf(other) == member; });
      if (!joined) blocked.absentMembers.push_back(member);
    }
    return blocked;
  }

  void reportDeadlock() const {
    std::vector<BlockedStream> blocked;
    size_t blockedDevices = 0;
    for (int device = 0; device < program_.deviceCount(); ++device) {
      bool stuck = false;
      for (int stream = 0; stream < kStreams; ++stream) {
        const uint32_t slot = slotOf(device, stream);
        if (streams_[slot].cursor >= queueOf(slot).ops.size()) continue;
        stuck = true;
        if (blockedDevices < kMaxReportedDevices) blocked.push_back(blockedStream(slot));
      }
      if (stuck) ++blockedDevices;
    }
    if (!blocked.empty()) throw SimulationError(deadlockMessage(program_, blocked, blockedDevices));
  }

  void finish() {
    const size_t count = program_.devices.size();
    result_.bubbleFraction.assign(count, 0);
    for (size_t d = 0; d < count; ++d) {
      if (result_.makespan > 0) {
        result_.bubbleFraction[d] = (result_.makespan - result_.computeBusy[d]) / result_.makespan;
      }
    }
    for (std::vector<TimedInstruction>& timeline : result_.timeline) {
      std::sort(
          timeline.begin(), timeline.end(),
          [](const TimedInstruction& a, const TimedInstruction& b) { return a.index < b.index; });
    }
  }

  const ir::Program& program_;
  const SimulatorOptions& options_;
  std::vector<DeviceQueues> queues_;
  std::vector<StreamState> streams_;        // by slot
  std::vector<Arrivals> arrivals_;          // per device
  std::vector<PendingCollective> pending_;  // per group
  std::vector<uint32_t> woken_;             // slots of streams that may be able to run
  std::vector<double> coreFree_;            // per shared host core: when it is next free
  std::priority_queue<CoreRequest, std::vector<CoreRequest>, std::greater<>> coreQueue_;
  SimulationResult result_;
};

// One pass over the program, device by device, builds the stream queues and takes
// the measures that do not depend on timing while each device's code is in cache.
// The builder's tables go before the run starts.
std::vector<DeviceQueues> buildQueues(const ir::Program& program, const SimulatorOptions& options,
                                      StepMeasures& measures) {
  StreamQueueBuilder builder(program, options);
  for (int device = 0; device < program.deviceCount(); ++device) {
    builder.addDevice(device);
    measures.addDevice(device);
  }
  return builder.finish();
}

}  // namespace

double collectiveSeconds(Opcode op, double bytes, int members, const Link& link) {
  if (members <= 1) return 0;
  const double n = members;
  const double beta = 1 / link.bandwidth;
  const double alpha = link.latency;
  switch (op) {
    case Opcode::kAllReduce:
      return 2 * (n - 1) / n * bytes * beta + 2 * (n - 1) * alpha;
    case Opcode::kAllGather:
    case Opcode::kReduceScatter:
      return (n - 1) / n * bytes * beta + (n - 1) * alpha;
    case Opcode::kAllToAll:
      return (n - 1) / (n * n) * bytes * (n / 2) * beta + (n - 1) * alpha;
    case Opcode::kBroadcast:
      return bytes * beta + (n - 1) * alpha;
    default:
      return 0;
  }
}

SimulationResult simulate(const ir::Program& program, const SimulatorOptions& options) {
  StepMeasures measures(program, options);
  SimulationResult result = Engine(program, options, buildQueues(program, options, measures)).run();
  measures.finish(result);
  return result;
}

}  // namespace meshflow::runtime::sim
