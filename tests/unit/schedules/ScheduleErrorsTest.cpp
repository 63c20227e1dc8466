// Invalid requests raise ScheduleError whose message names the broken rule.
#include <catch2/catch.hpp>

#include "passes/schedules/ScheduleError.h"
#include "passes/schedules/ScheduleTiming.h"
#include "passes/schedules/Schedules.h"

using meshflow::passes::buildSchedule;
using meshflow::passes::ScheduleError;
using meshflow::passes::ScheduleRequest;
using meshflow::passes::timeSchedule;
using meshflow::passes::TimingOptions;

namespace {

std::string errorOf(const ScheduleRequest& request) {
  try {
    buildSchedule(request);
  } catch (const ScheduleError& error) {
    return error.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("ScheduleError is a std::runtime_error", "[schedules][errors]") {
  CHECK_THROWS_AS(buildSchedule({"nope", 2, 2, 0, 0}), std::runtime_error);
}

TEST_CASE("each broken rule is named", "[schedules][errors]") {
  CHECK(errorOf({"nope", 2, 2, 0, 0}) ==
        "unknown pipeline kind 'nope' (expected one of gpipe, 1f1b, interleaved, zb-h1, zbv)");
  CHECK(errorOf({"1f1b", 0, 4, 0, 0}) == "1f1b needs stages >= 1, got 0");
  CHECK(errorOf({"gpipe", 2, 0, 0, 0}) == "gpipe needs microbatches >= 1, got 0");
  CHECK(errorOf({"zb-h1", -1, 4, 0, 0}) == "zb-h1 needs stages >= 1, got -1");
  CHECK(errorOf({"interleaved", 4, 6, 2, 0}) ==
        "interleaved needs microbatches to be a multiple of the group size 4, got 6");
  CHECK(errorOf({"interleaved", 2, 6, 2, 4}) ==
        "interleaved needs microbatches to be a multiple of the group size 4, got 6");
  CHECK(errorOf({"interleaved", 4, 8, 1, 0}) ==
        "interleaved needs at least 2 chunks per rank (--virtual >= 2), got 1");
  CHECK(errorOf({"interleaved", 4, 8, 2, 2}) ==
        "interleaved needs a microbatch group size of at least the stages (4), got 2");
  CHECK(errorOf({"interleaved", 0, 8, 2, 0}) == "interleaved needs stages >= 1, got 0");
  CHECK(errorOf({"zbv", 4, 8, 3, 0}) == "zbv needs exactly 2 chunks per rank (--virtual 2), got 3");
  CHECK(errorOf({"zbv", 4, 8, 1, 0}) == "zbv needs exactly 2 chunks per rank (--virtual 2), got 1");
  CHECK(errorOf({"1f1b", 4, 8, 2, 0}) ==
        "1f1b needs exactly 1 chunk per rank (--virtual 1), got 2");
  CHECK(errorOf({"gpipe", 4, 8, 2, 0}) ==
        "gpipe needs exactly 1 chunk per rank (--virtual 1), got 2");
}

TEST_CASE("default chunks: 2 for interleaved and zbv, 1 otherwise", "[schedules][errors]") {
  CHECK(buildSchedule({"interleaved", 2, 4, 0, 0}).chunks == 2);
  CHECK(buildSchedule({"zbv", 2, 4, 0, 0}).chunks == 2);
  CHECK(buildSchedule({"1f1b", 2, 4, 0, 0}).chunks == 1);
}

TEST_CASE("bad times are named", "[schedules][errors]") {
  TimingOptions options;
  options.times = {1, 1, 2};
  CHECK_THROWS_WITH(timeSchedule(buildSchedule({"zb-h1", 2, 2, 0, 0}), options),
                    "W time 2 exceeds B time 1 on rank 0; B is the whole backward, B = I + W");
  // Ordinary schedules never run W, so its time does not matter to them.
  CHECK_NOTHROW(timeSchedule(buildSchedule({"1f1b", 2, 2, 0, 0}), options));
  options.times = {-1, 2, 1};
  CHECK_THROWS_WITH(timeSchedule(buildSchedule({"1f1b", 2, 2, 0, 0}), options),
                    "times must not be negative (rank 0)");
  options = {};
  options.perRank.resize(3);
  CHECK_THROWS_WITH(timeSchedule(buildSchedule({"1f1b", 2, 2, 0, 0}), options),
                    "per-rank times name 3 ranks, the schedule has 2");
}
