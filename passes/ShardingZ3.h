// Internal to solveSharding: the residual problem handed to Z3's optimiser.
//
// One Boolean per (node, strategy) with exactly-one constraints; node and edge
// costs become weighted soft constraints (MaxSAT, which Z3's MaxRes engine solves
// far faster than an arithmetic objective), infinite costs hard clauses, memory a
// pseudo-Boolean constraint with 32-bit coefficients (exact when the memory
// values, scaled by a power of two, are integers that fit; otherwise rounded so
// that Z3's answers still fit, and then Z3 proves neither optimality nor
// infeasibility).
//
// Seeds: on Z3 4.8.12, z3::optimize accepts no seed parameter (its parameter set
// is the `opt` module's; `random_seed`, `smt.random_seed` and `sat.random_seed`
// are refused as unknown, and a z3::config on the context ignores them). The
// SAT and SMT engines it drives read their seeds from Z3's global parameters,
// whose defaults are fixed. meshflow never sets those globals (no global state),
// so Z3 runs with its default seeds; Z3 is deterministic for the same input and
// parameters, and solveSharding's canonical form makes proven-optimal answers
// independent of which optimum Z3 finds.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "passes/ShardingSearch.h"

namespace meshflow::passes::sharding {

struct Z3Outcome {
  std::optional<std::vector<int>> choice;  ///< Per residual node.
  bool optimal = false;                    ///< Z3 proved it optimal.
  bool infeasible = false;                 ///< Z3 proved that nothing fits.
};

struct Z3Limits {
  double timeBudgetSeconds = 10.0;
  uint64_t resourceLimit = 0;  ///< Z3's rlimit; 0 = none.
};

/// Minimises the residual's objective under its memory budget.
///
/// No bound from an answer already known is added: an objective bound is a
/// pseudo-Boolean sum over every soft constraint, and measured on a 40-node
/// budgeted problem it made Z3 overrun a 2 s timeout by 2.7 s (20-bit weights)
/// to 17 s (exact weights) without finding anything better. The caller keeps the
/// better of Z3's answer and its own instead.
Z3Outcome solveWithZ3(Residual residual, const Z3Limits& limits);

}  // namespace meshflow::passes::sharding
