// Internal to solveSharding: the residual problem as a mixed-integer linear
// program for CBC, the engine for what the fast path (folding, branch and bound,
// the Lagrangian search) cannot close.
//
// The formulation is Alpa's ILP with node-strategy binaries x[i][k] (exactly one
// per node) and edge-pair variables y[e][s][t] tied to both ends by their
// marginals: Σ_t y[e][s][t] = x[a][s] and Σ_s y[e][s][t] = x[b][t] (the "local
// polytope"; Alpa writes ≤ with Σ y = 1, whose relaxation is weaker). With x
// integral the marginals force y to the one chosen pair. y is declared binary
// all the same: CBC's probing and clique cuts then work on the pairs too, which
// measured 3–4× faster proofs on random DAGs of 50–100 ops under a budget.
// Infinite costs have no column. The memory budget is one row.
#pragma once

#include <optional>
#include <vector>

#include "passes/ShardingCbc.h"
#include "passes/ShardingSearch.h"

namespace meshflow::passes::sharding {

struct MilpOutcome {
  std::optional<std::vector<int>> choice;  ///< Per residual node.
  bool optimal = false;                    ///< CBC proved it optimal.
  bool infeasible = false;                 ///< CBC proved that nothing is feasible.
  /// Under a cutoff, CBC proved that no answer is below it: an answer in hand
  /// whose objective is within the cutoff is optimal (`bound` is the cutoff).
  bool nothingBelowCutoff = false;
  double bound = -kInfinity;  ///< A proven lower bound, without the residual's constant.
};

/// The cutoff for CBC from the residual objective of an answer in hand: just
/// above it, so that an answer as good is still accepted.
double cutoffAbove(double residualObjective);

/// Minimises the residual's objective under its memory budget.
MilpOutcome solveResidualMilp(const Residual& residual, const MilpLimits& limits);

}  // namespace meshflow::passes::sharding
