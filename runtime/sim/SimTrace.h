// A Chrome trace / Perfetto JSON of a simulated Program, in the format of
// passes/schedules/Timeline.h's chromeTrace: one process per device, one thread
// (row) per stream — compute, comm, grad — and one complete ("X") event per
// instruction that ran.
#pragma once

#include <nlohmann/json.hpp>

#include "ir/Program.h"
#include "runtime/sim/Simulator.h"

namespace meshflow::runtime::sim {

/// Events have name (`F3`, `B3.1`, `B7 2/4` for a piece, `send→5`, `recv←4`,
/// `all-reduce`, `update`), cat (forward, backward, input-grad, weight-grad,
/// update, p2p, collective), ph "X", ts and dur in microseconds of simulated
/// time, pid = device, tid = stream (0 compute, 1 comm, 2 grad) and args with
/// the instruction's text; process_name and thread_name metadata name them.
/// Needs a result simulated with SimulatorOptions::recordTimeline; throws
/// SimulationError otherwise.
nlohmann::json simulationTrace(const ir::Program& program, const SimulationResult& result);

}  // namespace meshflow::runtime::sim
