// The step time of a pipeline of priced stages under a schedule, by the closed
// forms of the shared reference (reference/schedules.md) generalised to unequal
// stages, and the microbatches each rank holds at its peak.
//
// With p ranks, m microbatches, stage latencies t_i = F_i + B_i and the slowest
// t_max: GPipe and 1F1B take Σ t_i + (m − 1)·t_max (one microbatch through
// every stage, then m − 1 more at the pace of the slowest); interleaved with v
// chunks m·t_max + (Σ t_i − t_max)/v (ZB-V is priced like interleaved with its
// two chunks, an upper bound on its near-zero bubble); ZB-H1 m·t_max + (Σ t_i − t_max)·(F + I −
// W)/(F + B) of the slowest stage (with F = I = W, a third of 1F1B's bubble).
// Gradient synchronisation and the optimizer step follow, once per step.
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
