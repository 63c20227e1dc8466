// From a planner's ir::Plan to what the parallel runtime executes.
#pragma once

#include "ir/Graph.h"
#include "ir/Plan.h"
#include "runtime/parallel/ParallelTrainer.h"

namespace meshflow::runtime {

/// The ParallelPlan of `plan`, which was planned for `forward`: the stage of
/// every op from the plan's layer ranges, pipeline rank r on the devices of
/// stage r, the schedule and the cost model's seconds per rank.
///
/// The cpu runtime executes pipeline and data parallelism: every stage's logical
/// mesh must be (a, 1), the same a for every stage, each of its a devices a
/// data-parallel replica that runs the whole stage. Intra-operator sharding
/// (tensor parallelism, mesh dimension 1 > 1) is refused with ParallelRunError;
/// plan with max_tensor_parallel = 1.
ParallelPlan parallelPlanOf(const ir::Graph& forward, const ir::Plan& plan);

/// "2 stages × 2 replicas, 1f1b, 4 microbatches of 2, 4 devices".
std::string parallelPlanText(const ParallelPlan& plan, std::int64_t batch);

}  // namespace meshflow::runtime
