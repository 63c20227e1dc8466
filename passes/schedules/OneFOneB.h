// 1F1B: one forward, one backward (PipeDream-Flush as Megatron-LM and Picotron run it).
#pragma once

#include "ir/PipelineSchedule.h"

namespace meshflow::passes {

/// Rank r warms up with w = min(p−r−1, m) forwards, then alternates F(i+w), B(i)
/// for i = 0..m−w−1, then cools down with the remaining w backwards. It holds at
/// most min(p−r, m) microbatches in flight, against GPipe's m.
ir::PipelineSchedule buildOneFOneB(int stages, int microbatches);

}  // namespace meshflow::passes
