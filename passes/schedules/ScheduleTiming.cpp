#include "passes/schedules/ScheduleTiming.h"

#include <fmt/format.h>

#include <algorithm>

#include "passes/schedules/ScheduleError.h"
#include "passes/schedules/ScheduleValidator.h"

namespace meshflow::passes {
namespace {

const StageTimes& timesOf(const TimingOptions& options, int rank) {
  return options.perRank.empty() ? options.times : options.perRank[static_cast<size_t>(rank)];
}

void checkTimes(const ir::PipelineSchedule& schedule, const StageTimes& times, int rank) {
  if (times.forward < 0 || times.backward < 0 || times.weight < 0) {
    throw ScheduleError(fmt::format("times must not be negative (rank {})", rank));
  }
  if (schedule.splitsBackward() && times.weight > times.backward) {
    throw ScheduleError(
        fmt::format("W time {} exceeds B time {} on rank {}; B is the whole backward, B = I + W",
                    times.weight.toString(), times.backward.toString(), rank));
  }
}

void checkOptions(const ir::PipelineSchedule& schedule, const TimingOptions& options) {
  if (!options.perRank.empty() && options.perRank.size() != static_cast<size_t>(schedule.stages)) {
    throw ScheduleError(fmt::format("per-rank times name {} ranks, the schedule has {}",
                                    options.perRank.size(), schedule.stages));
  }
  if (options.p2pLatency < 0) throw ScheduleError("P2P latency must not be negative");
  for (int r = 0; r < schedule.stages; ++r) checkTimes(schedule, timesOf(options, r), r);
}

Rational rankBusy(const std::vector<TimedAction>& actions) {
  Rational busy = 0;
  for (const TimedAction& timed : actions) busy += timed.end - timed.start;
  return busy;
}

Rational rankEnd(const std::vector<TimedAction>& actions) {
  return actions.empty() ? Rational(0) : actions.back().end;
}

}  // namespace

Rational ScheduleTiming::idle(int rank) const { return makespan - busy[static_cast<size_t>(rank)]; }

Rational ScheduleTiming::totalIdle() const {
  Rational total = 0;
  for (size_t r = 0; r < busy.size(); ++r) total += idle(static_cast<int>(r));
  return total;
}

Rational actionDuration(const ir::PipelineSchedule& schedule, const TimingOptions& options,
                        int rank, const ir::Action& action) {
  const StageTimes& times = timesOf(options, rank);
  const Rational perChunk(1, schedule.chunks);
  switch (action.kind) {
    case ir::ActionKind::kForward:
      return times.forward * perChunk;
    case ir::ActionKind::kBackward:
      return times.backward * perChunk;
    case ir::ActionKind::kInputGrad:
      return (times.backward - times.weight) * perChunk;
    case ir::ActionKind::kWeightGrad:
      return times.weight * perChunk;
    case ir::ActionKind::kRecompute:  // not a schedule's action: part of B or I here
      return 0;
  }
  return 0;
}

std::vector<int> peakInflight(const ir::PipelineSchedule& schedule) {
  std::vector<int> peaks;
  for (const std::vector<ir::Action>& actions : schedule.ranks) {
    int held = 0;
    int peak = 0;
    for (const ir::Action& action : actions) {
      if (action.kind == ir::ActionKind::kForward) ++held;
      if (action.kind == ir::ActionKind::kBackward || action.kind == ir::ActionKind::kInputGrad) {
        --held;
      }
      peak = std::max(peak, held);
    }
    peaks.push_back(peak);
  }
  return peaks;
}

ScheduleTiming timeSchedule(const ir::PipelineSchedule& schedule, const TimingOptions& options) {
  validateSchedule(schedule);
  checkOptions(schedule, options);
  ListExecution run = executeSchedule(
      schedule,
      [&](int rank, const ir::Action& action) {
        return actionDuration(schedule, options, rank, action);
      },
      options.p2pLatency);
  if (!run.complete) throw ScheduleError(run.stuck);

  ScheduleTiming timing;
  for (const std::vector<TimedAction>& actions : run.ranks) {
    timing.makespan = max(timing.makespan, rankEnd(actions));
    timing.busy.push_back(rankBusy(actions));
  }
  const bool empty = timing.makespan == 0;
  for (size_t r = 0; r < run.ranks.size(); ++r) {
    timing.bubbleFraction.push_back(empty ? Rational(0)
                                          : timing.idle(static_cast<int>(r)) / timing.makespan);
  }
  timing.overallBubbleFraction =
      empty ? Rational(0) : timing.totalIdle() / (timing.makespan * schedule.stages);
  timing.peakInflight = peakInflight(schedule);
  timing.ranks = std::move(run.ranks);
  return timing;
}

}  // namespace meshflow::passes
