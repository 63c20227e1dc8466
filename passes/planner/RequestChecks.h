// Checks of a plan request against the model, made before any search so that
// a request that cannot be met names the hint at fault (rather than ending as
// "no plan fits in memory").
#pragma once

#include "ir/Graph.h"
#include "passes/Planner.h"

namespace meshflow::passes {

/// `stages = N` needs at least N layers: each stage holds one or more.
/// Throws PlanningError("stages", ...) naming both counts.
void checkStagesFitLayers(const PlanRequest& request, int layers);

/// Every `pin(op = PATTERN, ...)` must match an op of `forward`; one that
/// matches none is a typo the search would silently ignore. Throws
/// PlanningError naming the pattern and the nearest scopes of the model.
void checkOpPinsMatch(const PlanRequest& request, const ir::Graph& forward);

}  // namespace meshflow::passes
