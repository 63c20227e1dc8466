// The text form of actions and schedules prints and parses back.
#include <catch2/catch.hpp>

#include "ir/PipelineSchedule.h"
#include "passes/schedules/Schedules.h"

using meshflow::ir::Action;
using meshflow::ir::ActionKind;
using meshflow::ir::actionText;
using meshflow::ir::parseAction;
using meshflow::ir::parseScheduleText;
using meshflow::ir::PipelineSchedule;
using meshflow::ir::ScheduleParseError;
using meshflow::ir::scheduleText;
using meshflow::passes::buildSchedule;

TEST_CASE("action text: chunk only when the schedule has several", "[schedules][text]") {
  CHECK(actionText({ActionKind::kForward, 3, 0}, 1) == "F3");
  CHECK(actionText({ActionKind::kBackward, 3, 0}, 1) == "B3");
  CHECK(actionText({ActionKind::kInputGrad, 3, 0}, 1) == "I3");
  CHECK(actionText({ActionKind::kWeightGrad, 12, 0}, 1) == "W12");
  CHECK(actionText({ActionKind::kForward, 3, 1}, 2) == "F3.1");
  CHECK(actionText({ActionKind::kForward, 3, 0}, 2) == "F3.0");
}

TEST_CASE("action text parses back", "[schedules][text]") {
  CHECK(parseAction("F3") == Action{ActionKind::kForward, 3, 0});
  CHECK(parseAction("W10.1") == Action{ActionKind::kWeightGrad, 10, 1});
  CHECK(parseAction("I0") == Action{ActionKind::kInputGrad, 0, 0});
  for (const char* bad : {"", "F", "X3", "F3.", "F.1", "F-1", "f3", "F3.1.2", "F 3"}) {
    INFO(bad);
    CHECK_THROWS_AS(parseAction(bad), ScheduleParseError);
  }
  CHECK_THROWS_WITH(parseAction("X3"), "expected an action like F3, B3, I3, W3 or F3.1, got 'X3'");
}

TEST_CASE("schedule text has a header and one line per rank", "[schedules][text]") {
  CHECK(scheduleText(buildSchedule({"1f1b", 2, 3, 0, 0})) ==
        "schedule 1f1b stages=2 microbatches=3 chunks=1\n"
        "rank 0: F0 F1 B0 F2 B1 B2\n"
        "rank 1: F0 B0 F1 B1 F2 B2\n");
}

TEST_CASE("every kind's schedule text parses back to an equal schedule", "[schedules][text]") {
  for (const char* kind : {"gpipe", "1f1b", "interleaved", "zb-h1", "zbv"}) {
    PipelineSchedule schedule = buildSchedule({kind, 3, 6, 0, 3});
    INFO(kind);
    CHECK(parseScheduleText(scheduleText(schedule)) == schedule);
  }
}

TEST_CASE("malformed schedule text says what was expected", "[schedules][text]") {
  CHECK_THROWS_WITH(parseScheduleText(""), "empty schedule text");
  CHECK_THROWS_WITH(parseScheduleText("schedule 2f2b stages=1 microbatches=1 chunks=1\n"),
                    "unknown schedule kind '2f2b'");
  CHECK_THROWS_WITH(parseScheduleText("schedule gpipe stages=0 microbatches=1 chunks=1\n"),
                    "expected 'stages=N' with N >= 1, got 'stages=0'");
  CHECK_THROWS_WITH(parseScheduleText("schedule gpipe stages=2 microbatches=1 chunks=1\n"
                                      "rank 0: F0 B0\n"),
                    "expected 2 rank lines, got 1");
  CHECK_THROWS_WITH(parseScheduleText("schedule gpipe stages=1 microbatches=1 chunks=1\n"
                                      "rank 1: F0 B0\n"),
                    "expected 'rank 0: ACTION ...', got 'rank 1: F0 B0'");
}

TEST_CASE("virtual stages: interleaved c·p + r, ZB-V in a V", "[schedules][text]") {
  PipelineSchedule interleaved = buildSchedule({"interleaved", 4, 4, 2, 0});
  CHECK(interleaved.virtualStage(1, 0) == 1);
  CHECK(interleaved.virtualStage(1, 1) == 5);
  CHECK(interleaved.locate(5).rank == 1);
  CHECK(interleaved.locate(5).chunk == 1);
  PipelineSchedule zbv = buildSchedule({"zbv", 4, 8, 2, 0});
  CHECK(zbv.virtualStage(0, 1) == 7);
  CHECK(zbv.virtualStage(3, 1) == 4);
  CHECK(zbv.locate(4).rank == 3);
  CHECK(zbv.locate(7).rank == 0);
  CHECK(zbv.locate(7).chunk == 1);
}
