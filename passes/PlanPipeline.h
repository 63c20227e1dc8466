// From a plan to what lowering and the simulator need: the bridge that lets
// `simulate(p)`, `p.timeline()` and `p.save_trace(path)` run a planned step on
// the discrete-event simulator (docs/simulator.md).
#pragma once

#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "ir/Plan.h"
#include "passes/PipelineDescription.h"
#include "runtime/sim/Simulator.h"

namespace meshflow::passes {

/// The pipeline of `plan` as lowering reads it (passes/PipelineDescription.h).
///
/// - One StageDescription per pipeline rank (plan.pipelineRanks()). A rank holds
///   the virtual stages the schedule puts on it (k mod p, or ZB-V's V); its
///   seconds, held activation, parameter and gradient bytes are the sums of
///   theirs, its activation bytes the largest any of its chunks sends.
/// - Data parallelism: a stage with logical mesh (a, b) is a replicas of b
///   devices, replica i holding devices[i·b, (i+1)·b) (mesh dimension 0 is the
///   data axis, ir/Cluster.h). Lowering needs the same replica count on every
///   rank; when the ranks' a differ, each rank becomes one replica of its whole
///   submesh (its gradients summed inside that mesh, by the axes its strategies
///   leave them partial over) and a note in `notes` says so.
/// - Gradients the strategies leave partial inside a replica's mesh become
///   StageDescription::meshSyncs (docs/planning.md).
/// - The schedule: its name, microbatches and chunks.
///
/// Throws LoweringError (passes/Lowering.h) for a plan that cannot describe a
/// pipeline: no stages, stages not a multiple of chunks, chunks of one rank on
/// different devices, or a logical mesh that does not view the stage's devices.
PipelineDescription describePipeline(const ir::Plan& plan,
                                     std::vector<std::string>* notes = nullptr);

/// Whether every stage of `plan` has the same rows (logical mesh dimension 0),
/// so that row i of every rank is data-parallel replica i — describePipeline's
/// choice, and the parallel runtime's (runtime/parallel/PlanExecution.h).
bool sameDataParallelRows(const ir::Plan& plan);

/// Simulator options for `cluster`: devices per node, the intra-node link (per
/// device) and the inter-node link. ir::Cluster's inter-node bandwidth is the
/// node's (shared by its devices), while the simulator gives every transfer its
/// link's full bandwidth; since lowering sends from every device of a mesh at
/// once, each device gets its share, the node's bandwidth / devices per node.
runtime::sim::SimulatorOptions simulatorOptions(const ir::Cluster& cluster);

}  // namespace meshflow::passes
