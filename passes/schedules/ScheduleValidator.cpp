#include "passes/schedules/ScheduleValidator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>
#include <tuple>

#include "passes/schedules/ListExecution.h"
#include "passes/schedules/ScheduleError.h"

namespace meshflow::passes {
namespace {

using ir::ActionKind;

// A long broken schedule would otherwise bury the first problem in thousands.
constexpr size_t kMaxProblems = 20;

std::vector<ActionKind> kindsOf(const ir::PipelineSchedule& schedule) {
  if (schedule.splitsBackward()) {
    return {ActionKind::kForward, ActionKind::kInputGrad, ActionKind::kWeightGrad};
  }
  return {ActionKind::kForward, ActionKind::kBackward};
}

bool inRange(const ir::PipelineSchedule& schedule, const ir::Action& action) {
  return action.microbatch >= 0 && action.microbatch < schedule.microbatches && action.chunk >= 0 &&
         action.chunk < schedule.chunks;
}

bool allowedKind(const ir::PipelineSchedule& schedule, ActionKind kind) {
  for (ActionKind allowed : kindsOf(schedule)) {
    if (kind == allowed) return true;
  }
  return false;
}

using Key = std::tuple<int, char, int>;  // virtual stage, kind letter, microbatch

void checkActions(const ir::PipelineSchedule& schedule, std::map<Key, int>& counts,
                  std::vector<std::string>& problems) {
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    for (const ir::Action& action : schedule.ranks[r]) {
      std::string text = ir::actionText(action, schedule.chunks);
      if (!inRange(schedule, action)) {
        problems.push_back(fmt::format("rank {}: {} is outside {} microbatches and {} chunks", r,
                                       text, schedule.microbatches, schedule.chunks));
      } else if (!allowedKind(schedule, action.kind)) {
        problems.push_back(fmt::format("rank {}: {} has a kind {} schedules do not run", r, text,
                                       ir::scheduleKindName(schedule.kind)));
      } else {
        int stage = schedule.virtualStage(static_cast<int>(r), action.chunk);
        ++counts[{stage, ir::actionKindLetter(action.kind), action.microbatch}];
      }
    }
  }
}

void checkCounts(const ir::PipelineSchedule& schedule, const std::map<Key, int>& counts,
                 std::vector<std::string>& problems) {
  for (int s = 0; s < schedule.virtualStages(); ++s) {
    for (ActionKind kind : kindsOf(schedule)) {
      for (int j = 0; j < schedule.microbatches; ++j) {
        auto it = counts.find({s, ir::actionKindLetter(kind), j});
        int count = it == counts.end() ? 0 : it->second;
        if (count == 1) continue;
        problems.push_back(fmt::format("stage {}: {}{} runs {} times, expected once", s,
                                       ir::actionKindLetter(kind), j, count));
      }
    }
  }
}

}  // namespace

std::vector<std::string> scheduleProblems(const ir::PipelineSchedule& schedule) {
  std::vector<std::string> problems;
  if (schedule.ranks.size() != static_cast<size_t>(schedule.stages)) {
    problems.push_back(
        fmt::format("{} rank lists for {} stages", schedule.ranks.size(), schedule.stages));
    return problems;
  }
  std::map<Key, int> counts;
  checkActions(schedule, counts, problems);
  checkCounts(schedule, counts, problems);
  if (problems.empty()) {
    ListExecution run = executeSchedule(schedule, [](int, const ir::Action&) { return 1; });
    if (!run.complete) problems.push_back(run.stuck);
  }
  if (problems.size() > kMaxProblems) {
    size_t more = problems.size() - kMaxProblems;
    problems.resize(kMaxProblems);
    problems.push_back(fmt::format("… and {} more", more));
  }
  return problems;
}

void validateSchedule(const ir::PipelineSchedule& schedule) {
  std::vector<std::string> problems = scheduleProblems(schedule);
  if (problems.empty()) return;
  throw ScheduleError(fmt::format("invalid {} schedule: {}", ir::scheduleKindName(schedule.kind),
                                  fmt::join(problems, "; ")));
}

}  // namespace meshflow::passes
