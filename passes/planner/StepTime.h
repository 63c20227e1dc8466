// The step time of a pipeline of priced stages under a schedule, by the closed
// forms of the shared reference (reference/schedules.md) generalised to unequal
// stages, and the microbatches each rank holds at its peak.
//
// With p ranks, m microbatches, stage latencies t_i = F_i + B_i (each with its
// incoming activation and outgoing gradient) and a steady-state period T — the
// largest of the slowest rank's compute, the busiest comm stream and (but for
// GPipe, which runs each phase at its own pace) Σ t_i / p, the round trip spread
// over the microbatches in flight: GPipe and 1F1B take Σ t_i + (m − 1)·T;
// interleaved with v chunks m·T + (Σ t_i − T)/v (ZB-V is priced like
// interleaved with its two chunks, an upper bound on its near-zero bubble);
// ZB-H1 m·T + (Σ t_i − T)·(F + I − W)/(F + B) of the slowest stage, its
// transfers left whole (with F = I = W, a third of 1F1B's bubble). The
// slowest rank's update and the gradient synchronisation its last backward
// does not hide follow, once per step (docs/planning.md, "The closed forms").
#pragma once

#include <vector>

#include "ir/PipelineSchedule.h"
#include "passes/planner/StageModel.h"

namespace meshflow::passes {

/// Seconds of the pipeline part of one step (forward and backward of every
/// microbatch through every stage). `stages` are the p pipeline ranks, each
/// with all its chunks.
double pipelineSeconds(ir::ScheduleKind kind, int chunks, int microbatches,
                       const std::vector<StageEstimate>& stages);

/// pipelineSeconds plus the slowest rank's gradient synchronisation and update.
double stepSeconds(ir::ScheduleKind kind, int chunks, int microbatches,
                   const std::vector<StageEstimate>& stages);

/// The part of a rank's gradient synchronisation that its last backward does
/// not hide (bucketed all-reduces overlap the backward that finishes them).
double exposedSync(const StageEstimate& rank, int chunks);

/// Microbatches' worth of activations rank `rank` of `ranks` holds at its peak
/// (reference/schedules.md): GPipe m; 1F1B min(p − r, m); ZB-H1 and ZB-V min(p, m)
/// on every rank (a stash lives until its deferred W: 1F1B's peak, everywhere);
/// interleaved (w_r + 1) chunks of 1/v each, w_r = 2(p − r − 1) + (v − 1)·p, at most v·m.
double heldMicrobatches(ir::ScheduleKind kind, int chunks, int ranks, int rank, int microbatches);

/// How rank `rank` holds microbatches at its peak: heldMicrobatches; steady
/// when a forward follows a backward (not GPipe, more microbatches than held);
/// zero-bubble ranks defer r microbatches' W (at most m − 1).
Holding holdingOf(ir::ScheduleKind kind, int chunks, int ranks, int rank, int microbatches);

}  // namespace meshflow::passes
