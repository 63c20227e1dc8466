// One simulated step of a plan, as the planner's final choice asks for it
// (passes::PlanRequest::simulateStep): the plan described, lowered and run on
// the discrete-event simulator with the cluster's links — what simulate(p)
// reports as its step_time.
#pragma once

#include "ir/Cluster.h"
#include "ir/Plan.h"

namespace meshflow::runtime::sim {

/// Seconds of one simulated step of `plan` on `cluster`. Throws what
/// describePipeline, lowerPipeline or the simulator throw.
double simulatePlanStep(const ir::Plan& plan, const ir::Cluster& cluster);

}  // namespace meshflow::runtime::sim
