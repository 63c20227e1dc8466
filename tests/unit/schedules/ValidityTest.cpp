// Every generated schedule is dependency-valid, and the validator catches the
// ways a schedule can be broken.
#include <catch2/catch.hpp>

#include "passes/schedules/ScheduleError.h"
#include "passes/schedules/ScheduleTiming.h"
#include "passes/schedules/ScheduleValidator.h"
#include "passes/schedules/Schedules.h"

using meshflow::ir::Action;
using meshflow::ir::ActionKind;
using meshflow::ir::PipelineSchedule;
using meshflow::passes::buildSchedule;
using meshflow::passes::ScheduleError;
using meshflow::passes::scheduleProblems;
using meshflow::passes::ScheduleRequest;
using meshflow::passes::timeSchedule;

namespace {

// Whether the request satisfies the kind's rules, so the grid can skip the rest.
bool allowed(const std::string& kind, int p, int m, int v) {
  if (kind == "interleaved") return v >= 2 && m % p == 0;
  if (kind == "zbv") return v == 2;
  return v == 1;
}

bool anyProblemContains(const std::vector<std::string>& problems, const std::string& text) {
  for (const std::string& problem : problems) {
    if (problem.find(text) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("every generated schedule is dependency-valid over a grid of (p, m, v)",
          "[schedules][validity]") {
  int checked = 0;
  for (const char* kind : {"gpipe", "1f1b", "interleaved", "zb-h1", "zbv"}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 17; ++m) {
        for (int v = 1; v <= 4; ++v) {
          if (!allowed(kind, p, m, v)) continue;
          INFO(kind << " p=" << p << " m=" << m << " v=" << v);
          PipelineSchedule schedule = buildSchedule({kind, p, m, v, 0});
          CHECK(scheduleProblems(schedule).empty());
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 400);
}

TEST_CASE("the validator reports a microbatch missing or repeated on a stage",
          "[schedules][validity]") {
  PipelineSchedule schedule = buildSchedule({"1f1b", 2, 3, 1, 0});
  schedule.ranks[1].pop_back();  // drops B2 on stage 1
  CHECK(anyProblemContains(scheduleProblems(schedule), "stage 1: B2 runs 0 times, expected once"));
  schedule.ranks[1].push_back({ActionKind::kBackward, 1, 0});
  CHECK(anyProblemContains(scheduleProblems(schedule), "stage 1: B1 runs 2 times, expected once"));
}

TEST_CASE("the validator reports actions out of range or of the wrong kind",
          "[schedules][validity]") {
  PipelineSchedule schedule = buildSchedule({"1f1b", 2, 2, 1, 0});
  schedule.ranks[0][0] = {ActionKind::kForward, 5, 0};
  CHECK(anyProblemContains(scheduleProblems(schedule), "rank 0: F5 is outside 2 microbatches"));
  schedule = buildSchedule({"1f1b", 2, 2, 1, 0});
  schedule.ranks[0].back() = {ActionKind::kWeightGrad, 1, 0};
  CHECK(anyProblemContains(scheduleProblems(schedule), "W1 has a kind 1f1b schedules do not run"));
}

TEST_CASE("the validator finds a deadlock and names who waits for what", "[schedules][validity]") {
  // Rank 0 insists on B0 before it has sent F1, while rank 1 wants F1 before B0:
  // GPipe's rank 1 order against a rank 0 that goes backward too early.
  PipelineSchedule schedule = buildSchedule({"gpipe", 2, 2, 1, 0});
  schedule.ranks[0] = {{ActionKind::kForward, 0, 0},
                       {ActionKind::kBackward, 0, 0},
                       {ActionKind::kForward, 1, 0},
                       {ActionKind::kBackward, 1, 0}};
  std::vector<std::string> problems = scheduleProblems(schedule);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "deadlock: rank 0 waits at B0 for B/I0 of stage 1; rank 1 waits at F1 for F1 of stage 0");
  CHECK_THROWS_WITH(timeSchedule(schedule), Catch::Contains("deadlock: rank 0 waits at B0"));
}

TEST_CASE("a backward before its own forward is a deadlock, not a silent reorder",
          "[schedules][validity]") {
  PipelineSchedule schedule = buildSchedule({"1f1b", 1, 1, 1, 0});
  std::swap(schedule.ranks[0][0], schedule.ranks[0][1]);
  CHECK(anyProblemContains(scheduleProblems(schedule), "rank 0 waits at B0 for F0 of stage 0"));
}

TEST_CASE("a W before its I is a deadlock", "[schedules][validity]") {
  PipelineSchedule schedule = buildSchedule({"zb-h1", 1, 1, 1, 0});
  REQUIRE(schedule.ranks[0].size() == 3);
  std::swap(schedule.ranks[0][1], schedule.ranks[0][2]);
  CHECK(anyProblemContains(scheduleProblems(schedule), "rank 0 waits at W0 for B/I0 of stage 0"));
}

TEST_CASE("the wrong number of rank lists is reported", "[schedules][validity]") {
  PipelineSchedule schedule = buildSchedule({"1f1b", 3, 2, 1, 0});
  schedule.ranks.pop_back();
  CHECK(scheduleProblems(schedule) == std::vector<std::string>{"2 rank lists for 3 stages"});
}
