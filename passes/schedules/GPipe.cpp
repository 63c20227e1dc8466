#include "passes/schedules/GPipe.h"

#include "passes/schedules/ScheduleError.h"

namespace meshflow::passes {

ir::PipelineSchedule buildGPipe(int stages, int microbatches) {
  requirePipelineShape("gpipe", stages, microbatches);
  ir::PipelineSchedule schedule{ir::ScheduleKind::kGPipe, stages, microbatches, 1, {}};
  std::vector<ir::Action> order;
  for (int j = 0; j < microbatches; ++j) order.push_back({ir::ActionKind::kForward, j, 0});
  for (int j = 0; j < microbatches; ++j) order.push_back({ir::ActionKind::kBackward, j, 0});
  // Every rank runs the same order; only the start times differ.
  schedule.ranks.assign(static_cast<size_t>(stages), order);
  return schedule;
}

}  // namespace meshflow::passes
