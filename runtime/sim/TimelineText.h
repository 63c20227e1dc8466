// The text form of one device's timeline — a simulated step's or a measured
// one's: a row of columns, each showing the compute instruction that covers most
// of it. p.timeline() prints one per pipeline rank; bench_runtime prints the
// measured step under the simulated one.
#pragma once

#include <string>
#include <vector>

#include "ir/Program.h"
#include "runtime/sim/Simulator.h"

namespace meshflow::runtime::sim {

/// Columns of a timeline row.
inline constexpr int kTimelineColumns = 72;

/// One row of `columns` for `device` over [0, span): per column the letter of
/// the compute instruction (F, B, I, W; lower case for odd microbatches; U for
/// the optimizer step) that covers most of it, '.' where less than half of the
/// column is busy. `timeline` indexes `program`'s code of `device`.
std::string timelineRow(const ir::Program& program, int device,
                        const std::vector<TimedInstruction>& timeline, double span,
                        int columns = kTimelineColumns);

}  // namespace meshflow::runtime::sim
