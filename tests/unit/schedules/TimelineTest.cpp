// The text timeline, the Chrome trace and the SVG picture of a timed schedule.
#include <catch2/catch.hpp>

#include "passes/schedules/ScheduleTiming.h"
#include "passes/schedules/Schedules.h"
#include "passes/schedules/Timeline.h"

using meshflow::passes::buildSchedule;
using meshflow::passes::chromeTrace;
using meshflow::passes::Rational;
using meshflow::passes::textTimeline;
using meshflow::passes::timelineSvg;
using meshflow::passes::timeSchedule;
using meshflow::passes::TimingOptions;

namespace {

size_t countOf(const std::string& text, const std::string& needle) {
  size_t count = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++count;
  }
  return count;
}

}  // namespace

TEST_CASE("text timeline: one row per rank, one cell per unit step", "[schedules][timeline]") {
  auto schedule = buildSchedule({"1f1b", 2, 2, 0, 0});
  auto timing = timeSchedule(schedule);
  CHECK(textTimeline(schedule, timing) ==
        "rank 0 | F0 F1 .  .  B0 -- .  B1 --\n"
        "rank 1 | .  F0 B0 -- F1 B1 -- .  .\n"
        "one cell = 1 time unit\n");
}

TEST_CASE("text timeline: chunked actions scale the cell to the smallest step",
          "[schedules][timeline]") {
  auto schedule = buildSchedule({"interleaved", 2, 2, 2, 0});
  auto timing = timeSchedule(schedule);
  const std::string text = textTimeline(schedule, timing);
  CHECK(text.starts_with("rank 0 | F0.0 F1.0 F0.1 F1.1 "));
  CHECK(text.ends_with("one cell = 1/2 time units\n"));
}

TEST_CASE("text timeline: an unreadably wide one becomes a note", "[schedules][timeline]") {
  TimingOptions options;
  options.times = {Rational(1, 1000), 1, 0};
  auto schedule = buildSchedule({"1f1b", 2, 8, 0, 0});
  CHECK(textTimeline(schedule, timeSchedule(schedule, options))
            .starts_with("(text timeline omitted: "));
}

TEST_CASE("Chrome trace: metadata and one complete event per action", "[schedules][timeline]") {
  auto schedule = buildSchedule({"1f1b", 2, 2, 0, 0});
  auto trace = chromeTrace(schedule, timeSchedule(schedule));
  const auto& events = trace.at("traceEvents");
  REQUIRE(events.is_array());
  CHECK(events[0].at("name") == "process_name");
  CHECK(events[0].at("ph") == "M");
  CHECK(events[0].at("args").at("name") == "pipeline 1f1b p=2 m=2 v=1");
  int threadNames = 0;
  int complete = 0;
  for (const auto& event : events) {
    if (event.at("name") == "thread_name") ++threadNames;
    if (event.at("ph") != "X") continue;
    ++complete;
    for (const char* key : {"name", "cat", "ph", "ts", "dur", "pid", "tid"}) {
      CHECK(event.contains(key));
    }
  }
  CHECK(threadNames == 2);
  CHECK(complete == 8);
  // Rank 0 runs B0 over [4, 6): 4000 µs for 2000 µs.
  bool found = false;
  for (const auto& event : events) {
    if (event.at("ph") == "X" && event.at("tid") == 0 && event.at("name") == "B0") {
      CHECK(event.at("ts") == 4000.0);
      CHECK(event.at("dur") == 2000.0);
      CHECK(event.at("cat") == "backward");
      CHECK(event.at("args").at("stage") == 0);
      found = true;
    }
  }
  CHECK(found);
}

TEST_CASE("SVG: a box per action, rank labels, axis and legend", "[schedules][timeline]") {
  auto schedule = buildSchedule({"zb-h1", 3, 4, 0, 0});
  auto timing = timeSchedule(schedule);
  const std::string svg = timelineSvg(schedule, timing);
  CHECK(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
  CHECK(svg.ends_with("</svg>\n"));
  CHECK(countOf(svg, "<title>") == 3 * 4 * 3);
  CHECK(countOf(svg, ">rank ") == 3);
  CHECK(svg.find("W weight-grad") != std::string::npos);
  CHECK(svg.find(">time</text>") != std::string::npos);
  CHECK(svg.find("zb-h1 p=3 m=4 v=1") != std::string::npos);
}

TEST_CASE("timelines are deterministic", "[schedules][timeline]") {
  auto schedule = buildSchedule({"zbv", 3, 6, 0, 0});
  auto timing = timeSchedule(schedule);
  CHECK(timelineSvg(schedule, timing) == timelineSvg(schedule, timeSchedule(schedule)));
  CHECK(chromeTrace(schedule, timing).dump() ==
        chromeTrace(schedule, timeSchedule(schedule)).dump());
}
