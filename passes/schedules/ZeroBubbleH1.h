// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR'24, §2.1).
#pragma once

#include "ir/PipelineSchedule.h"

namespace meshflow::passes {

/// 1F1B with the backward split into I (input gradient) and W (weight gradient).
/// Rank r warms up with w = min(p−r−1, m) forwards, then runs F(i+w), I(i) pairs,
/// and runs W only r microbatches behind its I; the deferred W's fill the
/// cool-down, where each I is followed by the oldest pending W. With
/// t_F = t_I = t_W and m >= p the bubble is (p−1)·t_F per rank, a third of
/// 1F1B's, and no rank holds more activations than 1F1B's rank 0.
ir::PipelineSchedule buildZeroBubbleH1(int stages, int microbatches);

}  // namespace meshflow::passes
