// Lowering: a pipelined, data-parallel plan → per-device instruction streams.
#pragma once

#include <stdexcept>

#include "ir/Program.h"
#include "passes/PipelineDescription.h"

namespace meshflow::passes {

/// A description that cannot be lowered; the message names the field and stage.
class LoweringError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Lowers one training step of `description` to an ir::Program. Per device, in
/// the order the schedule (passes/schedules buildSchedule) gives its rank:
///
///   forward    [RECV act (+ ALL_GATHER, FREE tile)] RUN F [FREE act-in]
///              [SEND act … FREE act-out]
///   backward   [RECV grad (+ ALL_GATHER, FREE tile)] [RUN R] RUN B|I [FREE grad-in]
///              [FREE stash (B)] [SEND grad … FREE grad-out];  W: RUN W, FREE stash
///
/// A recomputing rank (StageDescription::recompute) runs RUN R, the forward work
/// its stash left out, before each B or I: it reads the stash and defines a
/// second stash buffer, which the backward reads and frees with the first.
///   then       UPDATE of the rank's stage (uses every gradient bucket).
///
/// Between ranks of equal mesh size, device k sends to device k. Between meshes of
/// different sizes (a senders, b receivers) the tensor is cut into b tiles; tile i
/// goes from sender i mod a to receiver i, and the receivers all-gather it (the
/// receiving spec replicates). Consecutive virtual stages on the same rank (the
/// bottom of ZB-V's V, or p = 1) hand the buffer over without communication.
///
/// Gradient synchronisation: a chunk's last backward (B, or W for zero-bubble
/// kinds) is emitted as one RUN piece per gradient bucket, each of equal cost and
/// each followed, when there is more than one replica, by an ALL_REDUCE of its
/// bucket over the replicas on the grad stream — the bucket leaves while the
/// rest of the backward still runs, as PyTorch DDP's bucketing does. A rank that
/// shards its optimizer state (StageDescription::shardOptimizer) reduce-scatters
/// each bucket instead, and follows its UPDATE with an in-place ALL_GATHER of its
/// parameters buffer over the replicas (ZeRO's gradient and optimizer-state
/// partitioning).
///
/// Throws LoweringError for an inconsistent description (no stages, replicas of
/// unequal count or size, a device used twice or out of range, negative costs or
/// bytes) and ScheduleError for a schedule rule broken.
ir::Program lowerPipeline(const PipelineDescription& description);

}  // namespace meshflow::passes
