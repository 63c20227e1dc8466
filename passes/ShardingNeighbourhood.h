// Internal to solveSharding: large-neighbourhood search, for answers that no
// engine proved optimal.
//
// A window of a few adjacent nodes is re-solved exactly with every other node
// fixed: the window's node costs take in the edges to the fixed nodes, its
// memory must fit in what the fixed nodes leave of the budget, and the
// residual branch and bound (ShardingSearch) finds its best choice. Single-node
// moves (Evaluator::improveLocally) are windows of one; windows of several
// nodes escape the local optima that single moves get stuck in (a memory
// budget that binds makes them common: lowering one node's cost needs memory
// another node gives up).
#pragma once

#include <functional>
#include <vector>

#include "passes/ShardingGraph.h"
#include "passes/ShardingSearch.h"

namespace meshflow::passes::sharding {

/// Re-solves windows of up to kWindowNodes nodes (each node with its nearest
/// neighbours, breadth first, in node order) until a sweep over every window
/// improves nothing, `steps` runs out (or reaches its deadline), or `stop`
/// returns true (asked between windows). `choice` must be feasible (and fit
/// `memory`, when given); it stays so and its objective never rises.
void improveByWindows(const CostGraph& g, const MemoryBudget* memory, std::vector<int>& choice,
                      StepBudget& steps, const std::function<bool()>& stop = nullptr);

/// The most nodes in one window. Measured on budgeted random DAGs of 100–200
/// ops: windows of 8 left answers up to 3% above CBC's where windows of 12
/// matched or beat them, in milliseconds either way.
inline constexpr size_t kWindowNodes = 12;

}  // namespace meshflow::passes::sharding
