// Interleaved 1F1B (Narayanan et al., SC'21) in Megatron-LM's order.
#pragma once

#include "ir/PipelineSchedule.h"

namespace meshflow::passes {

/// Each rank holds `chunks` (v >= 2) model chunks; chunk c of rank r is virtual
/// stage c·p + r. Microbatches run in groups of `groupSize` (g; 0 means p): the
/// forward order visits group 0 on chunk 0, group 0 on chunk 1, …, then group 1,
/// and the backward order is the same with chunks reversed. Rank r warms up with
/// 2(p−r−1) + (v−1)·g forwards (capped at v·m), then alternates one forward and
/// one backward, then cools down — Megatron-LM's
/// forward_backward_pipelining_with_interleaving. Requires g >= p and m a
/// multiple of g; throws ScheduleError otherwise.
ir::PipelineSchedule buildInterleaved(int stages, int microbatches, int chunks, int groupSize = 0);

}  // namespace meshflow::passes
