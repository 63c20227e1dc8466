// The messages of the simulator's SimulationErrors. Each names the devices and
// instructions involved, as `device D instruction I `TEXT``, so that a broken
// program can be fixed without a debugger.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Program.h"

namespace meshflow::runtime::sim {

/// Deadlock reports name the blocked streams of at most this many devices; one is
/// usually enough.
constexpr size_t kMaxReportedDevices = 8;

/// Why one stream of a deadlocked program cannot go on.
struct BlockedStream {
  int device = 0;
  uint32_t index = 0;  // the instruction the stream is stuck at
  bool waitsForBuffer = false;
  ir::BufferId buffer = 0;         // when waitsForBuffer: the first input never defined
  std::vector<int> absentMembers;  // otherwise: the members that never joined the collective
};

/// "deadlock: N devices can never finish:" and a line per blocked stream;
/// `blockedDevices` counts every blocked device, reported or not.
std::string deadlockMessage(const ir::Program& program, const std::vector<BlockedStream>& blocked,
                            size_t blockedDevices);

/// A collective that the members of `group` call differently.
std::string collectiveMismatchMessage(const ir::Program& program, int group, int firstDevice,
                                      uint32_t firstIndex, int device, uint32_t index);

}  // namespace meshflow::runtime::sim
