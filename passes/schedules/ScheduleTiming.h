// Evaluates a pipeline schedule with per-action times, exactly.
#pragma once

#include <vector>

#include "ir/PipelineSchedule.h"
#include "passes/schedules/ListExecution.h"
#include "passes/schedules/Rational.h"

namespace meshflow::passes {

/// Times of one microbatch on one pipeline rank's whole share of the model.
/// `backward` is the whole backward, B = I + W: zero-bubble schedules run an I of
/// backward − weight and a W of weight; other schedules ignore `weight`. A rank
/// with v chunks spends 1/v of these on each chunk.
struct StageTimes {
  Rational forward = 1;
  Rational backward = 2;
  Rational weight = 1;
};

struct TimingOptions {
  StageTimes times;                 // every rank's times, unless perRank is given
  std::vector<StageTimes> perRank;  // when not empty: one entry per rank
  Rational p2pLatency = 0;          // added to every dependency between ranks
};

struct ScheduleTiming {
  Rational makespan;
  std::vector<Rational> busy;            // per rank: time spent running actions
  std::vector<Rational> bubbleFraction;  // per rank: idle / makespan
  Rational overallBubbleFraction;        // Σ idle / (ranks × makespan)
  std::vector<int> peakInflight;  // per rank: most (microbatch, chunk) pairs with F done, B/I not
  std::vector<std::vector<TimedAction>> ranks;  // every action with its start and end

  /// makespan − busy[rank].
  Rational idle(int rank) const;
  /// Σ over ranks of idle(rank).
  Rational totalIdle() const;
};

/// The duration of `action` on `rank` under `options` (see StageTimes).
Rational actionDuration(const ir::PipelineSchedule& schedule, const TimingOptions& options,
                        int rank, const ir::Action& action);

/// Runs `schedule` by list execution (see ListExecution.h) and reports its figures.
/// Throws ScheduleError when the schedule is invalid (see ScheduleValidator.h), a
/// time is negative, W exceeds B for a zero-bubble kind, or perRank has the wrong size.
ScheduleTiming timeSchedule(const ir::PipelineSchedule& schedule,
                            const TimingOptions& options = {});

/// Peak in-flight count per rank, by walking each rank's actions in order.
std::vector<int> peakInflight(const ir::PipelineSchedule& schedule);

}  // namespace meshflow::passes
