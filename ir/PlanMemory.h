// The memory of a plan's devices, term by term: weights, gradients, optimizer
// state, activations and communication buffers, per pipeline rank (what
// `print(p)`, `p.memory()` and the REPL's :memory show; docs/planning.md,
// "Memory per device").
#pragma once

#include <string>
#include <vector>

#include "ir/Plan.h"

namespace meshflow::ir {

/// One pipeline rank's devices (each holds the same), in bytes.
struct RankMemory {
  int rank = 0;
  std::vector<int> stages;  ///< The virtual stages it runs.
  double weights = 0;
  double gradients = 0;
  double optimizerState = 0;
  /// The rest of the peak: activations held for backward, recomputation's
  /// rebuilt values and the backward's working set at the peak.
  double activations = 0;
  double peak = 0;  ///< The planner's peak (the sum of the four above).
  /// Outside the peak: one microbatch's activation received and one sent,
  /// and one gradient all-reduce bucket (25 MiB at most) where gradients sync.
  double communicationBuffers = 0;
};

/// Per pipeline rank, in rank order.
std::vector<RankMemory> planMemory(const Plan& plan);

/// The table: one row per run of ranks with the same figures ("stages 1-6"),
/// a header naming the columns, binary units (formatBytes).
std::string memoryTable(const Plan& plan);

}  // namespace meshflow::ir
