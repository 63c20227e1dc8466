#include "runtime/sim/Simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>

namespace meshflow::runtime::sim {
namespace {

using ir::BufferId;
using ir::Instruction;
using ir::Opcode;

constexpr int kStreams = 3;
constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();
// Deadlock reports name at most this many blocked devices; one is usually enough.
constexpr size_t kMaxReported = 8;

int streamIndex(ir::Stream stream) { return static_cast<int>(stream); }

// A collective instance in progress on one group: who has arrived, and when.
struct PendingCollective {
  int arrived = 0;
  double latestArrival = 0;
  int firstDevice = -1;
  uint32_t firstIndex = 0;
  std::vector<std::pair<int, int>> waiting;  // (device, stream)
};

struct DeviceState {
  std::array<uint32_t, kStreams> cursor{};  // next instruction of each stream
  std::array<double, kStreams> free{};      // when each stream is next free
  std::array<bool, kStreams> atCollective{};  // arrived at the collective under the cursor
  // How many uses of the instruction under each cursor are known ready, and the
  // latest of their ready times, so that a retry (an UPDATE waiting for hundreds
  // of gradient buckets) does not check them again.
  std::array<uint16_t, kStreams> readyUses{};
  std::array<double, kStreams> readyBy{};
  bool queued = false;
};

class Engine {
 public:
  Engine(const ir::Program& program, const SimulatorOptions& options)
      : program_(program),
        options_(options),
        devices_(static_cast<size_t>(program.deviceCount())),
        ready_(program.buffers.size(), 0.0),
        version_(program.buffers.size(), 0),
        pending_(program.groups.size()),
        volumes_(static_cast<size_t>(program.deviceCount())) {
    expectVersions();
    result_.computeBusy.assign(devices_.size(), 0);
    if (options_.recordTimeline) indexReceives();
    groupLinks_.reserve(program.groups.size());
    for (const std::vector<int>& group : program.groups) groupLinks_.push_back(groupLink(group));
  }

  SimulationResult run() {
    for (size_t d = 0; d < devices_.size(); ++d) enqueue(static_cast<int>(d));
    while (!queue_.empty()) {
      const int device = queue_.front();
      queue_.pop_front();
      devices_[static_cast<size_t>(device)].queued = false;
      advance(device);
    }
    reportDeadlock();
    finish();
    return std::move(result_);
  }

 private:
  const ir::DeviceCode& codeOf(int device) const {
    return program_.devices[static_cast<size_t>(device)];
  }
  int nodeOf(int device) const { return device / std::max(1, options_.devicesPerNode); }
  const Link& linkBetween(int a, int b) const {
    return nodeOf(a) == nodeOf(b) ? options_.intraNode : options_.interNode;
  }
  const Link& groupLink(const std::vector<int>& group) const {
    for (int member : group) {
      if (nodeOf(member) != nodeOf(group[0])) return options_.interNode;
    }
    return options_.intraNode;
  }

  // For every use operand, how many definitions of its buffer precede it in program
  // order; the use waits until that many have run (see ir::checkProgram's rule on
  // redefinition, which makes "that many" the same as "the latest").
  void expectVersions() {
    std::vector<uint16_t> defined(program_.buffers.size(), 0);
    expected_.resize(devices_.size());
    for (size_t d = 0; d < devices_.size(); ++d) {
      const ir::DeviceCode& code = program_.devices[d];
      std::vector<uint16_t>& expected = expected_[d];
      expected.assign(code.operands.size(), 0);
      for (const Instruction& in : code.code) {
        for (uint32_t k = 0; k < in.useCount; ++k) {
          expected[in.operandBegin + k] = defined[code.operands[in.operandBegin + k]];
        }
        for (BufferId def : code.defs(in)) ++defined[def];
      }
    }
  }

  void indexReceives() {
    result_.timeline.resize(devices_.size());
    recvIndex_.assign(program_.buffers.size(), 0);
    for (const ir::DeviceCode& code : program_.devices) {
      for (uint32_t i = 0; i < code.code.size(); ++i) {
        if (code.code[i].op == Opcode::kRecv) recvIndex_[code.defs(code.code[i])[0]] = i;
      }
    }
  }

  void enqueue(int device) {
    DeviceState& state = devices_[static_cast<size_t>(device)];
    if (state.queued) return;
    state.queued = true;
    queue_.push_back(device);
  }

  // Runs every instruction of `device` that can run now, on all streams.
  void advance(int device) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (int stream = 0; stream < kStreams; ++stream) {
        while (step(device, stream)) progress = true;
      }
    }
  }

  // The next instruction of `stream` at or after the cursor. FREE and RECV belong to
  // no stream: FREE takes no time, and a RECV is completed by its SEND.
  uint32_t seek(int device, int stream) {
    const ir::DeviceCode& code = codeOf(device);
    uint32_t& cursor = devices_[static_cast<size_t>(device)].cursor[static_cast<size_t>(stream)];
    while (cursor < code.code.size()) {
      const Instruction& in = code.code[cursor];
      if (in.op != Opcode::kFree && in.op != Opcode::kRecv && streamIndex(in.stream) == stream) {
        break;
      }
      ++cursor;
    }
    return cursor;
  }

  // When the inputs of `in` are ready, or NaN when one is not defined yet.
  double inputsReady(int device, const Instruction& in) const {
    const ir::DeviceCode& code = codeOf(device);
    const std::vector<uint16_t>& expected = expected_[static_cast<size_t>(device)];
    double ready = 0;
    for (uint32_t k = 0; k < in.useCount; ++k) {
      const BufferId id = code.operands[in.operandBegin + k];
      if (version_[id] < expected[in.operandBegin + k]) return kUnknown;
      ready = std::max(ready, ready_[id]);
    }
    return ready;
  }

  // Whether every input of `in`, under `stream`'s cursor, is defined; resumes
  // from the uses found ready on an earlier try.
  bool inputsKnown(int device, int stream, const Instruction& in) {
    DeviceState& state = devices_[static_cast<size_t>(device)];
    const BufferId* operands = codeOf(device).operands.data() + in.operandBegin;
    const uint16_t* expected = expected_[static_cast<size_t>(device)].data() + in.operandBegin;
    uint16_t& known = state.readyUses[static_cast<size_t>(stream)];
    double& readyBy = state.readyBy[static_cast<size_t>(stream)];
    for (; known < in.useCount; ++known) {
      const BufferId id = operands[known];
      if (version_[id] < expected[known]) return false;
      readyBy = std::max(readyBy, ready_[id]);
    }
    return true;
  }

  void define(int device, const Instruction& in, double when) {
    for (BufferId def : codeOf(device).defs(in)) {
      ready_[def] = when;
      ++version_[def];
    }
  }

  void record(int device, uint32_t index, double start, double end) {
    if (options_.recordTimeline) {
      result_.timeline[static_cast<size_t>(device)].push_back({index, start, end});
    }
    result_.makespan = std::max(result_.makespan, end);
  }

  void addVolume(int from, int to, double bytes) {
    if (bytes <= 0) return;
    // A device talks to few peers, so a short list beats a hash map here.
    for (auto& [peer, total] : volumes_[static_cast<size_t>(from)]) {
      if (peer == to) {
        total += bytes;
        return;
      }
    }
    volumes_[static_cast<size_t>(from)].emplace_back(to, bytes);
  }

  bool step(int device, int stream) {
    const uint32_t index = seek(device, stream);
    const ir::DeviceCode& code = codeOf(device);
    if (index >= code.code.size()) return false;
    const Instruction& in = code.code[index];
    DeviceState& state = devices_[static_cast<size_t>(device)];
    if (!inputsKnown(device, stream, in)) return false;
    const double inputs = state.readyBy[static_cast<size_t>(stream)];
    double& free = state.free[static_cast<size_t>(stream)];
    const double start = std::max(free, inputs);
    switch (in.op) {
      case Opcode::kRun:
      case Opcode::kUpdate: {
        const double end = start + in.cost;
        result_.computeBusy[static_cast<size_t>(device)] += in.cost;
        finishInstruction(device, stream, index, start, end);
        return true;
      }
      case Opcode::kSend: {
        const double end =
            start + linkBetween(device, in.peer).transferSeconds(static_cast<double>(in.bytes));
        addVolume(device, in.peer, static_cast<double>(in.bytes));
        finishInstruction(device, stream, index, start, end);
        deliver(in, start, end);
        return true;
      }
      default:
        return arriveAtCollective(device, stream, index, start);
    }
  }

  // The SEND's data has crossed the link at `end`: the peer's RECV is complete and
  // the buffer it defines is ready.
  void deliver(const Instruction& send, double start, double end) {
    ready_[send.target] = end;
    ++version_[send.target];
    if (options_.recordTimeline) record(send.peer, recvIndex_[send.target], start, end);
    enqueue(send.peer);
  }

  void finishInstruction(int device, int stream, uint32_t index, double start, double end) {
    DeviceState& state = devices_[static_cast<size_t>(device)];
    state.free[static_cast<size_t>(stream)] = end;
    state.readyUses[static_cast<size_t>(stream)] = 0;
    state.readyBy[static_cast<size_t>(stream)] = 0;
    define(device, codeOf(device).code[index], end);
    record(device, index, start, end);
    ++state.cursor[static_cast<size_t>(stream)];
  }

  bool arriveAtCollective(int device, int stream, uint32_t index, double start) {
    DeviceState& state = devices_[static_cast<size_t>(device)];
    if (state.atCollective[static_cast<size_t>(stream)]) return false;  // still waiting
    const Instruction& in = codeOf(device).code[index];
    PendingCollective& pending = pending_[static_cast<size_t>(in.peer)];
    if (pending.arrived == 0) {
      pending.firstDevice = device;
      pending.firstIndex = index;
    } else {
      requireSameCollective(pending, device, index);
    }
    state.atCollective[static_cast<size_t>(stream)] = true;
    ++pending.arrived;
    pending.latestArrival = std::max(pending.latestArrival, start);
    pending.waiting.emplace_back(device, stream);
    const std::vector<int>& group = program_.groups[static_cast<size_t>(in.peer)];
    if (pending.arrived < static_cast<int>(group.size())) return false;
    completeCollective(in, group, pending);
    return true;
  }

  void requireSameCollective(const PendingCollective& pending, int device, uint32_t index) const {
    const Instruction& first = codeOf(pending.firstDevice).code[pending.firstIndex];
    const Instruction& mine = codeOf(device).code[index];
    if (first.op == mine.op && first.bytes == mine.bytes) return;
    throw SimulationError(fmt::format(
        "collective mismatch on group {}: device {} instruction {} `{}` meets device {} "
        "instruction {} `{}`",
        mine.peer, pending.firstDevice, pending.firstIndex,
        ir::instructionText(program_, pending.firstDevice, first), device, index,
        ir::instructionText(program_, device, mine)));
  }

  void completeCollective(const Instruction& in, const std::vector<int>& group,
                          PendingCollective& pending) {
    const Link& link = groupLinks_[static_cast<size_t>(in.peer)];
    const double start = pending.latestArrival;
    const double end =
        start + collectiveSeconds(in.op, static_cast<double>(in.bytes), static_cast<int>(group.size()), link);
    addRingVolume(in, group);
    std::vector<std::pair<int, int>> members = std::move(pending.waiting);
    pending = PendingCollective{};
    for (auto [member, stream] : members) {
      DeviceState& state = devices_[static_cast<size_t>(member)];
      state.atCollective[static_cast<size_t>(stream)] = false;
      finishInstruction(member, stream, state.cursor[static_cast<size_t>(stream)], start, end);
      enqueue(member);
    }
  }

  // Ring traffic: each member sends to the next member of the group this much.
  void addRingVolume(const Instruction& in, const std::vector<int>& group) {
    const double n = static_cast<double>(group.size());
    if (group.size() < 2) return;
    const double bytes = static_cast<double>(in.bytes);
    double perMember = (n - 1) / n * bytes;
    if (in.op == Opcode::kAllReduce) perMember *= 2;
    for (size_t i = 0; i < group.size(); ++i) {
      const bool lastOfChain = in.op == Opcode::kBroadcast && i + 1 == group.size();
      if (lastOfChain) continue;
      addVolume(group[i], group[(i + 1) % group.size()],
                in.op == Opcode::kBroadcast ? bytes : perMember);
    }
  }

  // The first input of `in` that is not defined yet.
  BufferId missingInput(int device, const Instruction& in) const {
    const ir::DeviceCode& code = codeOf(device);
    const std::vector<uint16_t>& expected = expected_[static_cast<size_t>(device)];
    for (uint32_t k = 0; k < in.useCount; ++k) {
      const BufferId id = code.operands[in.operandBegin + k];
      if (version_[id] < expected[in.operandBegin + k]) return id;
    }
    return 0;
  }

  std::string where(int device, size_t index) const {
    const Instruction& in = codeOf(device).code[index];
    return fmt::format("device {} instruction {} `{}`", device, index,
                       ir::instructionText(program_, device, in));
  }

  // Names the instruction that should have produced `buffer` for `device`: the SEND
  // that fills it, or the last instruction before `before` that defines it.
  std::string producerOf(int device, size_t before, BufferId buffer) const {
    for (int d = 0; d < program_.deviceCount(); ++d) {
      const ir::DeviceCode& code = codeOf(d);
      for (size_t i = 0; i < code.code.size(); ++i) {
        const Instruction& in = code.code[i];
        if (in.op == Opcode::kSend && in.target == buffer) return "its SEND, " + where(d, i);
      }
    }
    const ir::DeviceCode& code = codeOf(device);
    for (size_t i = before; i-- > 0;) {
      std::span<const BufferId> defs = code.defs(code.code[i]);
      if (std::find(defs.begin(), defs.end(), buffer) != defs.end()) return where(device, i);
    }
    return "no instruction";
  }

  std::string blockedReason(int device, uint32_t index) const {
    const Instruction& in = codeOf(device).code[index];
    if (std::isnan(inputsReady(device, in))) {
      const BufferId buffer = missingInput(device, in);
      return where(device, index) + fmt::format(" waits for buffer {} from {}", buffer,
                                                producerOf(device, index, buffer));
    }
    const PendingCollective& pending = pending_[static_cast<size_t>(in.peer)];
    std::string missing;
    for (int member : program_.groups[static_cast<size_t>(in.peer)]) {
      bool arrived = false;
      for (auto [waiting, s] : pending.waiting) arrived = arrived || waiting == member;
      if (!arrived) missing += fmt::format("{}{}", missing.empty() ? "" : ", ", member);
    }
    return where(device, index) +
           fmt::format(" waits for device(s) {} to join group {}", missing, in.peer);
  }

  void reportDeadlock() {
    std::vector<std::string> reasons;
    size_t blockedDevices = 0;
    for (size_t d = 0; d < devices_.size(); ++d) {
      bool blocked = false;
      for (int stream = 0; stream < kStreams; ++stream) {
        const uint32_t index = seek(static_cast<int>(d), stream);
        if (index >= codeOf(static_cast<int>(d)).code.size()) continue;
        blocked = true;
        if (blockedDevices < kMaxReported) {
          reasons.push_back(blockedReason(static_cast<int>(d), index));
        }
      }
      if (blocked) ++blockedDevices;
    }
    if (reasons.empty()) return;
    std::string message = fmt::format("deadlock: {} device{} can never finish:", blockedDevices,
                                      blockedDevices == 1 ? "" : "s");
    for (const std::string& reason : reasons) message += "\n  " + reason;
    if (blockedDevices > kMaxReported) message += "\n  …";
    throw SimulationError(message);
  }

  void finish() {
    const size_t count = devices_.size();
    result_.bubbleFraction.assign(count, 0);
    for (size_t d = 0; d < count; ++d) {
      if (result_.makespan > 0) {
        result_.bubbleFraction[d] = (result_.makespan - result_.computeBusy[d]) / result_.makespan;
      }
    }
    measureMemory();
    for (std::vector<TimedInstruction>& timeline : result_.timeline) {
      std::sort(timeline.begin(), timeline.end(),
                [](const TimedInstruction& a, const TimedInstruction& b) { return a.index < b.index; });
    }
    for (size_t from = 0; from < volumes_.size(); ++from) {
      for (const auto& [to, bytes] : volumes_[from]) {
        const bool inter = nodeOf(static_cast<int>(from)) != nodeOf(to);
        result_.links.push_back({static_cast<int>(from), to, bytes, inter});
        (inter ? result_.interNodeBytes : result_.intraNodeBytes) += bytes;
      }
    }
    std::sort(result_.links.begin(), result_.links.end(),
              [](const LinkVolume& a, const LinkVolume& b) {
                return std::pair(a.from, a.to) < std::pair(b.from, b.to);
              });
  }

  void measureMemory() {
    const size_t count = devices_.size();
    result_.residentBytes.assign(count, 0);
    for (const ir::Buffer& buffer : program_.buffers) {
      if (buffer.resident()) result_.residentBytes[static_cast<size_t>(buffer.device)] += buffer.bytes;
    }
    std::vector<bool> allocated(program_.buffers.size(), false);
    result_.peakBytes = result_.residentBytes;
    for (size_t d = 0; d < count; ++d) {
      const ir::DeviceCode& code = program_.devices[d];
      int64_t live = result_.residentBytes[d];
      for (const Instruction& in : code.code) {
        if (in.op == Opcode::kFree) {
          live -= program_.buffers[code.uses(in)[0]].bytes;
          continue;
        }
        for (BufferId def : code.defs(in)) {
          if (program_.buffers[def].resident() || allocated[def]) continue;
          allocated[def] = true;
          live += program_.buffers[def].bytes;
        }
        result_.peakBytes[d] = std::max(result_.peakBytes[d], live);
      }
    }
  }

  const ir::Program& program_;
  const SimulatorOptions& options_;
  std::vector<DeviceState> devices_;
  std::vector<std::vector<uint16_t>> expected_;  // per device, per operand
  std::vector<double> ready_;                    // per buffer: when its latest value exists
  std::vector<uint16_t> version_;                // per buffer: definitions run so far
  std::vector<uint32_t> recvIndex_;  // per buffer a RECV defines: that RECV (timeline only)
  std::vector<PendingCollective> pending_;       // per group
  std::vector<Link> groupLinks_;                 // per group
  std::deque<int> queue_;
  std::vector<std::vector<std::pair<int, double>>> volumes_;  // per sender: (peer, bytes)
  SimulationResult result_;
};

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
  ir::checkMessages(program);
  return Engine(program, options).run();
}

}  // namespace meshflow::runtime::sim
