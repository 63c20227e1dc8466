// How much memory per device a request that fits nowhere would need: found by
// planning again under larger budgets, so the figure is a plan's, not a guess
// (docs/planning.md, "When nothing fits").
#pragma once

#include <optional>

#include "ir/Cluster.h"
#include "ir/Graph.h"
#include "passes/Planner.h"

namespace meshflow::passes {

struct MemoryFloor {
  double fits = 0;      ///< The peak per device of the leanest plan found.
  double tooSmall = 0;  ///< A budget no plan fits in (at most `fits`).
};

/// The leanest plan's peak for `request` (its memoryPerDevice, the failing
/// budget, is where the search starts), by bisection on the budget until the
/// bracket is within `precision` (relative) or `seconds` of planning have
/// passed. Nothing when no budget gives a plan (the request fails for another
/// reason).
std::optional<MemoryFloor> memoryFloor(const ir::Graph& forward, const ir::Cluster& cluster,
                                       PlanRequest request, double precision = 0.02,
                                       double seconds = 20);

}  // namespace meshflow::passes
