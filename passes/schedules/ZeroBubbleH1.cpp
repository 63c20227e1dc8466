#include "passes/schedules/ZeroBubbleH1.h"

#include <algorithm>

#include "passes/schedules/ScheduleError.h"

namespace meshflow::passes {
namespace {

using ir::ActionKind;

// Deferring rank r's W by r microbatches keeps p microbatches' activations alive on
// every rank (forward done, W not yet): rank 0 runs W right after I, exactly at
// 1F1B's peak, and later ranks, which 1F1B leaves with fewer, use the slack to
// push W out of the critical path into the tail where 1F1B idles.
std::vector<ir::Action> rankOrder(int stages, int microbatches, int rank) {
  const int warmup = std::min(stages - rank - 1, microbatches);
  std::vector<ir::Action> order;
  int nextWeight = 0;
  for (int j = 0; j < warmup; ++j) order.push_back({ActionKind::kForward, j, 0});
  for (int i = 0; i < microbatches - warmup; ++i) {
    order.push_back({ActionKind::kForward, i + warmup, 0});
    order.push_back({ActionKind::kInputGrad, i, 0});
    if (i >= rank) order.push_back({ActionKind::kWeightGrad, nextWeight++, 0});
  }
  for (int j = microbatches - warmup; j < microbatches; ++j) {
    order.push_back({ActionKind::kInputGrad, j, 0});
    order.push_back({ActionKind::kWeightGrad, nextWeight++, 0});
  }
  while (nextWeight < microbatches) order.push_back({ActionKind::kWeightGrad, nextWeight++, 0});
  return order;
}

}  // namespace

ir::PipelineSchedule buildZeroBubbleH1(int stages, int microbatches) {
  requirePipelineShape("zb-h1", stages, microbatches);
  ir::PipelineSchedule schedule{ir::ScheduleKind::kZeroBubbleH1, stages, microbatches, 1, {}};
  for (int r = 0; r < stages; ++r) schedule.ranks.push_back(rankOrder(stages, microbatches, r));
  return schedule;
}

}  // namespace meshflow::passes
