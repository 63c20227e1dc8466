#include "runtime/sim/SimErrors.h"

#include <fmt/format.h>

#include <algorithm>

namespace meshflow::runtime::sim {
namespace {

using ir::BufferId;
using ir::Instruction;
using ir::Opcode;

std::string where(const ir::Program& program, int device, size_t index) {
  const Instruction& in = program.devices[static_cast<size_t>(device)].code[index];
  return fmt::format("device {} instruction {} `{}`", device, index,
                     ir::instructionText(program, device, in));
}

// Names the instruction that should have produced `buffer` for `device`: the SEND
// that fills it, or the last instruction before `before` that defines it.
std::string producerOf(const ir::Program& program, int device, size_t before, BufferId buffer) {
  for (int d = 0; d < program.deviceCount(); ++d) {
    const ir::DeviceCode& code = program.devices[static_cast<size_t>(d)];
    for (size_t i = 0; i < code.code.size(); ++i) {
      const Instruction& in = code.code[i];
      if (in.op == Opcode::kSend && in.target == buffer) return "its SEND, " + where(program, d, i);
    }
  }
  const ir::DeviceCode& code = program.devices[static_cast<size_t>(device)];
  for (size_t i = before; i-- > 0;) {
    std::span<const BufferId> defs = code.defs(code.code[i]);
    if (std::find(defs.begin(), defs.end(), buffer) != defs.end()) return where(program, device, i);
  }
  return "no instruction";
}

std::string reason(const ir::Program& program, const BlockedStream& blocked) {
  const std::string stuck = where(program, blocked.device, blocked.index);
  if (blocked.waitsForBuffer) {
    return stuck + fmt::format(" waits for buffer {} from {}", blocked.buffer,
                               producerOf(program, blocked.device, blocked.index, blocked.buffer));
  }
  const Instruction& in = program.devices[static_cast<size_t>(blocked.device)].code[blocked.index];
  return stuck + fmt::format(" waits for device(s) {} to join group {}",
                             fmt::join(blocked.absentMembers, ", "), in.peer);
}

}  // namespace

std::string deadlockMessage(const ir::Program& program, const std::vector<BlockedStream>& blocked,
                            size_t blockedDevices) {
  std::string message = fmt::format("deadlock: {} device{} can never finish:", blockedDevices,
                                    blockedDevices == 1 ? "" : "s");
  for (const BlockedStream& stream : blocked) message += "\n  " + reason(program, stream);
  if (blockedDevices > kMaxReportedDevices) message += "\n  …";
  return message;
}

std::string collectiveMismatchMessage(const ir::Program& program, int group, int firstDevice,
                                      uint32_t firstIndex, int device, uint32_t index) {
  return fmt::format("collective mismatch on group {}: {} meets {}", group,
                     where(program, firstDevice, firstIndex), where(program, device, index));
}

}  // namespace meshflow::runtime::sim
