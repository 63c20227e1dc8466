#include "passes/schedules/ScheduleError.h"

#include <fmt/format.h>

namespace meshflow::passes {

void requirePipelineShape(std::string_view kind, int stages, int microbatches) {
  if (stages < 1) throw ScheduleError(fmt::format("{} needs stages >= 1, got {}", kind, stages));
  if (microbatches < 1) {
    throw ScheduleError(fmt::format("{} needs microbatches >= 1, got {}", kind, microbatches));
  }
}

}  // namespace meshflow::passes
