// Checks that a pipeline schedule can run and computes every gradient once.
#pragma once

#include <string>
#include <vector>

#include "ir/PipelineSchedule.h"

namespace meshflow::passes {

/// Everything wrong with `schedule`, in a deterministic order; empty when it is
/// valid. Checked: one action list per rank; microbatches and chunks in range;
/// F/B actions for ordinary kinds and F/I/W for zero-bubble kinds; every
/// microbatch exactly once per virtual stage per kind; and — only when all that
/// holds — that list execution finishes: no F before its input exists, no B/I
/// before the next stage's, no W before its I, no ranks waiting on each other.
std::vector<std::string> scheduleProblems(const ir::PipelineSchedule& schedule);

/// Throws ScheduleError listing the problems when scheduleProblems() finds any.
void validateSchedule(const ir::PipelineSchedule& schedule);

}  // namespace meshflow::passes
