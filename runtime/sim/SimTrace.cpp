#include "runtime/sim/SimTrace.h"

#include <fmt/format.h>

namespace meshflow::runtime::sim {
namespace {

using ir::Instruction;
using ir::Opcode;

constexpr double kMicrosPerSecond = 1e6;

std::string_view categoryOf(const Instruction& in) {
  switch (in.op) {
    case Opcode::kRun:
      switch (in.action) {
        case ir::ActionKind::kForward:
          return "forward";
        case ir::ActionKind::kBackward:
          return "backward";
        case ir::ActionKind::kInputGrad:
          return "input-grad";
        case ir::ActionKind::kWeightGrad:
          return "weight-grad";
        case ir::ActionKind::kRecompute:
          return "recompute";
      }
      return "?";
    case Opcode::kUpdate:
      return "update";
    case Opcode::kSend:
    case Opcode::kRecv:
      return "p2p";
    default:
      return "collective";
  }
}

// "all-reduce" for ALL_REDUCE.
std::string lowerName(Opcode op) {
  std::string name(ir::opcodeName(op));
  for (char& c : name) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
  return name;
}

std::string nameOf(const Instruction& in, int chunks) {
  switch (in.op) {
    case Opcode::kRun: {
      std::string name = ir::actionText({in.action, in.microbatch, in.chunk}, chunks);
      if (in.parts > 1) name += fmt::format(" {}/{}", in.part + 1, in.parts);
      return name;
    }
    case Opcode::kSend:
      return fmt::format("send→{}", in.peer);
    case Opcode::kRecv:
      return fmt::format("recv←{}", in.peer);
    default:
      return lowerName(in.op);
  }
}

// Chunk suffixes are written only when some RUN is on a chunk other than 0.
int chunkCount(const ir::Program& program) {
  int chunks = 1;
  for (const ir::DeviceCode& code : program.devices) {
    for (const Instruction& in : code.code) {
      if (in.op == Opcode::kRun) chunks = std::max(chunks, in.chunk + 1);
    }
  }
  return chunks;
}

nlohmann::json metadata(std::string_view name, int pid, int tid, nlohmann::json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", std::move(args)}};
}

}  // namespace

nlohmann::json simulationTrace(const ir::Program& program, const SimulationResult& result) {
  if (result.timeline.size() != program.devices.size()) {
    throw SimulationError("a trace needs a simulation run with recordTimeline set");
  }
  const int chunks = chunkCount(program);
  nlohmann::json events = nlohmann::json::array();
  for (int d = 0; d < program.deviceCount(); ++d) {
    events.push_back(metadata("process_name", d, 0, {{"name", fmt::format("device {}", d)}}));
    for (ir::Stream stream : {ir::Stream::kCompute, ir::Stream::kComm, ir::Stream::kGrad}) {
      events.push_back(metadata("thread_name", d, static_cast<int>(stream),
                                {{"name", ir::streamName(stream)}}));
    }
    const ir::DeviceCode& code = program.devices[static_cast<size_t>(d)];
    for (const TimedInstruction& timed : result.timeline[static_cast<size_t>(d)]) {
      const Instruction& in = code.code[timed.index];
      events.push_back({{"name", nameOf(in, chunks)},
                        {"cat", categoryOf(in)},
                        {"ph", "X"},
                        {"ts", timed.start * kMicrosPerSecond},
                        {"dur", (timed.end - timed.start) * kMicrosPerSecond},
                        {"pid", d},
                        {"tid", static_cast<int>(in.stream)},
                        {"args", {{"instruction", ir::instructionText(program, d, in)}}}});
    }
  }
  return {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ms"}};
}

}  // namespace meshflow::runtime::sim
