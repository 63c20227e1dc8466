#include "passes/schedules/ListExecution.h"

#include <fmt/format.h>

#include <deque>
#include <optional>

#include "passes/schedules/ScheduleError.h"

namespace meshflow::passes {
namespace {

using ir::ActionKind;

// B and I share a slot: both are "the input gradient of this stage exists".
enum Slot { kForwardSlot = 0, kInputGradSlot = 1, kWeightSlot = 2, kSlots = 3 };

Slot slotOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return kForwardSlot;
    case ActionKind::kBackward:
    case ActionKind::kInputGrad:
      return kInputGradSlot;
    case ActionKind::kWeightGrad:
      return kWeightSlot;
    case ActionKind::kRecompute:  // never in a schedule
      break;
  }
  return kForwardSlot;
}

struct Event {
  Slot slot;
  int stage;
  int microbatch;
};

std::vector<Event> dependenciesOf(const Event& self, int virtualStages) {
  std::vector<Event> deps;
  if (self.slot == kForwardSlot && self.stage > 0) {
    deps.push_back({kForwardSlot, self.stage - 1, self.microbatch});
  }
  if (self.slot == kInputGradSlot) {
    deps.push_back({kForwardSlot, self.stage, self.microbatch});
    if (self.stage + 1 < virtualStages) {
      deps.push_back({kInputGradSlot, self.stage + 1, self.microbatch});
    }
  }
  if (self.slot == kWeightSlot) deps.push_back({kInputGradSlot, self.stage, self.microbatch});
  return deps;
}

std::string eventText(const Event& event) {
  static constexpr const char* kNames[] = {"F", "B/I", "W"};
  return fmt::format("{}{} of stage {}", kNames[event.slot], event.microbatch, event.stage);
}

// The state of one execution; it lives only for one executeSchedule() call.
class Executor {
 public:
  Executor(const ir::PipelineSchedule& schedule, const ActionDuration& duration, Rational latency)
      : schedule_(schedule),
        duration_(duration),
        latency_(latency),
        stages_(schedule.virtualStages()),
        doneAt_(static_cast<size_t>(kSlots * stages_ * schedule.microbatches)),
        waiters_(doneAt_.size()),
        next_(schedule.ranks.size(), 0),
        clock_(schedule.ranks.size()),
        result_{std::vector<std::vector<TimedAction>>(schedule.ranks.size()), false, ""} {}

  ListExecution run() {
    std::deque<int> ready;
    for (size_t r = 0; r < schedule_.ranks.size(); ++r) ready.push_back(static_cast<int>(r));
    while (!ready.empty()) {
      int rank = ready.front();
      ready.pop_front();
      advance(rank, ready);
    }
    result_.complete = describeStuckRanks();
    return std::move(result_);
  }

 private:
  size_t index(const Event& e) const {
    return (static_cast<size_t>(e.slot) * stages_ + e.stage) * schedule_.microbatches +
           e.microbatch;
  }

  Event eventOf(int rank, const ir::Action& action) const {
    if (action.microbatch < 0 || action.microbatch >= schedule_.microbatches || action.chunk < 0 ||
        action.chunk >= schedule_.chunks) {
      throw ScheduleError(fmt::format("rank {} has {}, outside {} microbatches and {} chunks", rank,
                                      ir::actionText(action, schedule_.chunks),
                                      schedule_.microbatches, schedule_.chunks));
    }
    return {slotOf(action.kind), schedule_.virtualStage(rank, action.chunk), action.microbatch};
  }

  // Runs rank's actions until one waits for an event not yet done.
  void advance(int rank, std::deque<int>& ready) {
    const std::vector<ir::Action>& actions = schedule_.ranks[static_cast<size_t>(rank)];
    size_t& next = next_[static_cast<size_t>(rank)];
    for (; next < actions.size(); ++next) {
      const Event self = eventOf(rank, actions[next]);
      std::optional<Rational> start = startTime(rank, self);
      if (!start) return;
      finish(rank, actions[next], self, *start, ready);
    }
  }

  // The earliest start of `self` on `rank`, or nullopt after registering the rank
  // as a waiter on the first missing dependency.
  std::optional<Rational> startTime(int rank, const Event& self) {
    Rational start = clock_[static_cast<size_t>(rank)];
    for (const Event& dep : dependenciesOf(self, stages_)) {
      const std::optional<Rational>& done = doneAt_[index(dep)];
      if (!done) {
        waiters_[index(dep)].push_back(rank);
        return std::nullopt;
      }
      bool crossesRanks = schedule_.locate(dep.stage).rank != rank;
      start = max(start, crossesRanks ? *done + latency_ : *done);
    }
    return start;
  }

  void finish(int rank, const ir::Action& action, const Event& self, Rational start,
              std::deque<int>& ready) {
    std::optional<Rational>& done = doneAt_[index(self)];
    if (done) {
      throw ScheduleError(fmt::format("{} runs twice (again on rank {})", eventText(self), rank));
    }
    const Rational end = start + duration_(rank, action);
    done = end;
    clock_[static_cast<size_t>(rank)] = end;
    result_.ranks[static_cast<size_t>(rank)].push_back({action, self.stage, start, end});
    for (int waiter : waiters_[index(self)]) ready.push_back(waiter);
    waiters_[index(self)].clear();
  }

  // Fills result_.stuck and returns true when no rank is stuck.
  bool describeStuckRanks() {
    std::string stuck;
    for (size_t r = 0; r < schedule_.ranks.size(); ++r) {
      if (next_[r] == schedule_.ranks[r].size()) continue;
      const ir::Action& action = schedule_.ranks[r][next_[r]];
      const Event self = eventOf(static_cast<int>(r), action);
      for (const Event& dep : dependenciesOf(self, stages_)) {
        if (doneAt_[index(dep)]) continue;
        if (!stuck.empty()) stuck += "; ";
        stuck += fmt::format("rank {} waits at {} for {}", r,
                             ir::actionText(action, schedule_.chunks), eventText(dep));
        break;
      }
    }
    result_.stuck = stuck.empty() ? "" : "deadlock: " + stuck;
    return stuck.empty();
  }

  const ir::PipelineSchedule& schedule_;
  const ActionDuration& duration_;
  const Rational latency_;
  const int stages_;
  std::vector<std::optional<Rational>> doneAt_;
  std::vector<std::vector<int>> waiters_;
  std::vector<size_t> next_;
  std::vector<Rational> clock_;
  ListExecution result_;
};

}  // namespace

ListExecution executeSchedule(const ir::PipelineSchedule& schedule, const ActionDuration& duration,
                              Rational crossRankLatency) {
  if (schedule.ranks.size() != static_cast<size_t>(schedule.stages)) {
    throw ScheduleError(fmt::format("schedule has {} rank lists for {} stages",
                                    schedule.ranks.size(), schedule.stages));
  }
  return Executor(schedule, duration, crossRankLatency).run();
}

}  // namespace meshflow::passes
