// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR'24, §6).
#pragma once

#include "ir/PipelineSchedule.h"

namespace meshflow::passes {

/// Two chunks per rank placed in a V: chunk 0 of rank r is virtual stage r and
/// chunk 1 is virtual stage 2p−1−r, so the forward pass runs down the ranks and
/// back up, and rank 0 holds both the first and the last stage. Backward is split
/// into I and W. The per-rank order is the paper's handcrafted one (as PyTorch's
/// ScheduleZBVZeroBubble builds it): chunk-0 forwards, then alternating chunk-1
/// and chunk-0 forwards, a chunk-1 F/I/W phase, a steady phase of
/// F0 I0 W0 F1 I1 W1, and a cool-down whose W's fill the tail. With
/// t_F = t_I = t_W the bubble is about zero at 1F1B's activation memory.
ir::PipelineSchedule buildZeroBubbleV(int stages, int microbatches);

}  // namespace meshflow::passes
