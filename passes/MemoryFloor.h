// How much memory per device a request that fits nowhere would need: found by
// planning again under larger budgets, so the figure is a plan's, not a guess
// (docs/planning.md, "When nothing fits").
#pragma once

#include <optional>
#include <string>

#include "ir/Cluster.h"
#include "ir/Graph.h"
#include "passes/Planner.h"

namespace meshflow::passes {

struct MemoryFloor {
  double fits = 0;      ///< A budget per device under which the planner finds a plan.
  double tooSmall = 0;  ///< A budget under which it finds none (below `fits`).
  std::string plan;     ///< The plan found under `fits` (ir::Plan::description),
  double peak = 0;      ///< and its peak per device (at most `fits`).
};

/// The least budget per device under which the planner finds a plan for
/// `request`, bracketed, and that plan: from its memoryPerDevice (the budget that failed)
/// and the unbounded plan's peak, by bisection on the budget until the
/// bracket is within `precision` (relative) or `probes` plannings have
/// bisected it (a count, not a time, so the answer is the same on every
/// machine). Nothing when no budget gives a plan (the request fails for
/// another reason). Bisection needs a larger budget never to lose a plan,
/// which the planner's last, leanest search is there to keep
/// (docs/planning.md, "A larger budget never loses a plan").
std::optional<MemoryFloor> memoryFloor(const ir::Graph& forward, const ir::Cluster& cluster,
                                       PlanRequest request, double precision = 0.02,
                                       int probes = 10);

}  // namespace meshflow::passes
