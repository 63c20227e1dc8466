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
/// Every stage's logical mesh must be the same (a, b): row i (b devices) is
/// data-parallel replica i, and runs the stage's ops SPMD as a (1, b)
/// tensor-parallel group with the plan's strategies projected onto mesh
/// dimension 1 (a split or partial sum over dimension 0 is the replicas'
/// business: each row gets its own share of the batch). Other plans are
/// refused with ParallelRunError naming the stage.
ParallelPlan parallelPlanOf(const ir::Graph& forward, const ir::Plan& plan);

/// The plan's strategies seen from one data-parallel row: each spec with mesh
/// dimension 0 dropped (S01 becomes S1). Throws ParallelRunError when a
/// strategy names an op the model does not have.
std::map<ir::OpId, PlannedSpecs> tensorParallelStrategies(const ir::Graph& forward, const ir::Plan& plan);

/// "2 stages × 2 replicas, 1f1b, 4 microbatches of 2, 4 devices".
std::string parallelPlanText(const ParallelPlan& plan, std::int64_t batch);

}  // namespace meshflow::runtime
