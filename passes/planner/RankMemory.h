// The peak bytes each pipeline rank holds, found by replaying the rank's
// schedule the way the runtime runs it (runtime/parallel/ValueLifetimes.h):
// a forward leaves its stash, a (recomputing) backward rebuilds the rest,
// consumes the stash and starts the stage's weight gradients, a zero-bubble I
// keeps the stash and the output gradients W reads until that W. The closed
// form of StageEstimate::memory(Holding) is its upper-bound shortcut for the
// search; this is what the plan reports.
#pragma once

#include <optional>
#include <vector>

#include "ir/Cluster.h"
#include "ir/PipelineSchedule.h"
#include "passes/planner/Candidate.h"
#include "passes/planner/StageModel.h"

namespace meshflow::passes {

/// Per rank, its peak under `kind` with `chunks` chunks per rank and
/// `microbatches`: `stages` are the virtual stages in order (each one chunk),
/// `ranks` the per-rank sums (StageEstimate::operator+=). Nothing when the
/// schedule cannot be built. `backwardPeaks`, per virtual stage, is the most
/// one backward holds of its own microbatch (its stash not yet freed and the
/// weight gradients it has made; backwardPeak()), else the larger of the two.
std::optional<std::vector<double>> replayedPeaks(ir::ScheduleKind kind, int chunks,
                                                 int microbatches,
                                                 const std::vector<StageEstimate>& stages,
                                                 const std::vector<StageEstimate>& ranks,
                                                 const std::vector<double>& backwardPeaks = {});

/// The most one backward holds of its own microbatch, from its layers in
/// order (`kept[l]`: what the layer's forward kept for it; `rebuilt[l]`: what
/// recomputation rebuilds right before its backward; `gradients[l]`: its
/// weight gradients): the backward goes from the last layer back, rebuilding
/// the layer, making its gradients (which live until the RUN ends) and then
/// freeing what it kept and rebuilt.
double backwardPeak(const std::vector<double>& kept, const std::vector<double>& rebuilt,
                    const std::vector<double>& gradients);

/// Per rank, the peak a plan of `candidate` reports: replayedPeaks with each
/// virtual stage's backwardPeak from its layers' costs, or where the schedule
/// cannot be built the closed form (StepTime.h holdingOf).
std::vector<double> candidatePeaks(const Candidate& candidate, LayerCostTable& table,
                                   const std::vector<MeshConfig>& configs,
                                   const ir::Cluster& cluster);

}  // namespace meshflow::passes
