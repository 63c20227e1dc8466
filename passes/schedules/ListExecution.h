// List execution of a pipeline schedule: every rank runs its actions in order,
// each as soon as the rank is free and the action's inputs exist.
//
// Dependencies, on virtual stage s of S and microbatch j:
//   F(j, s)    needs F(j, s−1)                      (the activation it consumes)
//   B/I(j, s)  needs F(j, s) and B/I(j, s+1)        (its activations, the output gradient)
//   W(j, s)    needs I(j, s)                        (the gradient I computed)
// A dependency produced on another rank arrives `crossRankLatency` after it is done.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ir/PipelineSchedule.h"
#include "passes/schedules/Rational.h"

namespace meshflow::passes {

struct TimedAction {
  ir::Action action;
  int stage = 0;  // the virtual stage it ran on
  Rational start;
  Rational end;
};

struct ListExecution {
  std::vector<std::vector<TimedAction>> ranks;  // what each rank ran, in order
  bool complete = false;                        // every rank ran every action
  std::string stuck;  // when not complete: what each blocked rank waits for
};

using ActionDuration = std::function<Rational(int rank, const ir::Action& action)>;

/// Runs `schedule`; its actions must name existing microbatches and chunks and
/// appear at most once (throws ScheduleError otherwise). A schedule whose ranks
/// wait on each other forever comes back with complete == false.
ListExecution executeSchedule(const ir::PipelineSchedule& schedule, const ActionDuration& duration,
                              Rational crossRankLatency = 0);

}  // namespace meshflow::passes
