#include "passes/schedules/OneFOneB.h"

#include <algorithm>

#include "passes/schedules/ScheduleError.h"

namespace meshflow::passes {
namespace {

std::vector<ir::Action> rankOrder(int stages, int microbatches, int rank) {
  const int warmup = std::min(stages - rank - 1, microbatches);
  std::vector<ir::Action> order;
  for (int j = 0; j < warmup; ++j) order.push_back({ir::ActionKind::kForward, j, 0});
  for (int i = 0; i < microbatches - warmup; ++i) {
    order.push_back({ir::ActionKind::kForward, i + warmup, 0});
    order.push_back({ir::ActionKind::kBackward, i, 0});
  }
  for (int j = microbatches - warmup; j < microbatches; ++j) {
    order.push_back({ir::ActionKind::kBackward, j, 0});
  }
  return order;
}

}  // namespace

ir::PipelineSchedule buildOneFOneB(int stages, int microbatches) {
  requirePipelineShape("1f1b", stages, microbatches);
  ir::PipelineSchedule schedule{ir::ScheduleKind::kOneFOneB, stages, microbatches, 1, {}};
  for (int r = 0; r < stages; ++r) schedule.ranks.push_back(rankOrder(stages, microbatches, r));
  return schedule;
}

}  // namespace meshflow::passes
