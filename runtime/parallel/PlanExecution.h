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
/// When every stage's logical mesh has the same rows, (a, b_r)
/// (passes::sameDataParallelRows, as the simulator's description), row i is
/// data-parallel replica i on every rank and runs the stage's ops SPMD on a
/// (1, b_r) mesh with the strategies projected onto dimension 1: each row
/// takes its share of the batch, whatever the plan does along dimension 0
/// (the same result; a plan that also shards weights along dimension 0 is
/// run as data parallelism there). Otherwise each rank is one replica that
/// runs its stages' ops SPMD on its whole (a_r, b_r) mesh with the strategies
/// as planned, and values crossing to a rank of another mesh size travel in
/// tiles (docs/runtime.md).
ParallelPlan parallelPlanOf(const ir::Graph& forward, const ir::Plan& plan);

/// The plan's strategies by forward op; with `onColumns`, each spec seen from
/// one data-parallel row (mesh dimension 0 dropped: S01 becomes S1). Throws
/// ParallelRunError when a strategy names an op the model does not have or a
/// spec does not parse.
std::map<ir::OpId, PlannedSpecs> plannedStrategies(const ir::Graph& forward, const ir::Plan& plan, bool onColumns);

/// "2 stages × 2 replicas, 1f1b, 4 microbatches of 2, 4 devices" ("× 2
/// replicas (sharded optimizer), ..." when a rank shards its optimizer state).
/// With the planner's `planned` plan, a mesh's axes are named by what its
/// strategies do with them (ir/PlanAxes.h: "× 2 data-parallel" for a (1, 2)
/// mesh that splits the batch); without, by the mesh's convention (axis 1
/// tensor-parallel).
std::string parallelPlanText(const ParallelPlan& plan, std::int64_t batch,
                             const ir::Plan* planned = nullptr);

}  // namespace meshflow::runtime
