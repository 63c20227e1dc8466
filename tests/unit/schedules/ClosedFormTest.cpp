// Every closed form of shared/reference/schedules.md, checked exactly: timing runs
// on rationals, so equal means equal, not "within rounding".
#include <algorithm>
#include <catch2/catch.hpp>

#include "passes/schedules/ScheduleTiming.h"
#include "passes/schedules/Schedules.h"

using meshflow::passes::buildSchedule;
using meshflow::passes::Rational;
using meshflow::passes::ScheduleRequest;
using meshflow::passes::ScheduleTiming;
using meshflow::passes::timeSchedule;
using meshflow::passes::TimingOptions;

namespace {

TimingOptions timesFB(Rational forward, Rational backward) {
  TimingOptions options;
  options.times.forward = forward;
  options.times.backward = backward;
  return options;
}

ScheduleTiming run(const std::string& kind, int p, int m, int v, const TimingOptions& options) {
  return timeSchedule(buildSchedule({kind, p, m, v, 0}), options);
}

// Several (t_F, t_B) pairs, including fractions, so no form holds by coincidence.
const std::vector<std::pair<Rational, Rational>> kTimePairs = {
    {1, 2}, {1, 1}, {2, 3}, {Rational(1, 2), Rational(5, 3)}};

}  // namespace

TEST_CASE("the reference example: p=4, m=8, t_F=1, t_B=2", "[schedules][closed-form]") {
  const TimingOptions options = timesFB(1, 2);
  for (const char* kind : {"gpipe", "1f1b"}) {
    ScheduleTiming timing = run(kind, 4, 8, 1, options);
    CHECK(timing.makespan == 33);
    CHECK(timing.overallBubbleFraction == Rational(3, 11));
  }
  ScheduleTiming interleaved = run("interleaved", 4, 8, 2, options);
  CHECK(interleaved.makespan == Rational(57, 2));
  CHECK(interleaved.overallBubbleFraction == Rational(3, 19));
}

TEST_CASE("GPipe and 1F1B: makespan (m+p-1)(t_F+t_B), bubble (p-1)/(m+p-1)",
          "[schedules][closed-form]") {
  for (const auto& [tF, tB] : kTimePairs) {
    for (const char* kind : {"gpipe", "1f1b"}) {
      for (int p = 1; p <= 6; ++p) {
        for (int m = 1; m <= 12; ++m) {
          INFO(kind << " p=" << p << " m=" << m << " tF=" << tF.toString()
                    << " tB=" << tB.toString());
          ScheduleTiming timing = run(kind, p, m, 1, timesFB(tF, tB));
          CHECK(timing.makespan == (m + p - 1) * (tF + tB));
          CHECK(timing.overallBubbleFraction == Rational(p - 1, m + p - 1));
          // Bubble against the ideal m(t_F + t_B) of a rank that never waits.
          for (int r = 0; r < p; ++r) {
            CHECK(timing.idle(r) / (m * (tF + tB)) == Rational(p - 1, m));
          }
        }
      }
    }
  }
}

TEST_CASE("interleaved 1F1B: makespan m(t_F+t_B) + (p-1)(t_F+t_B)/v, bubble/ideal (p-1)/(vm)",
          "[schedules][closed-form]") {
  for (const auto& [tF, tB] : kTimePairs) {
    for (int p = 1; p <= 5; ++p) {
      for (int v = 2; v <= 4; ++v) {
        for (int m = p; m <= 4 * p; m += p) {
          INFO("p=" << p << " m=" << m << " v=" << v << " tF=" << tF.toString());
          ScheduleTiming timing = run("interleaved", p, m, v, timesFB(tF, tB));
          CHECK(timing.makespan == m * (tF + tB) + (p - 1) * (tF + tB) / v);
          for (int r = 0; r < p; ++r) {
            CHECK(timing.idle(r) / (m * (tF + tB)) == Rational(p - 1, v * m));
          }
        }
      }
    }
  }
}

TEST_CASE("peak microbatches in flight: GPipe m, 1F1B min(p-r, m)", "[schedules][closed-form]") {
  for (int p = 1; p <= 6; ++p) {
    for (int m = 1; m <= 12; ++m) {
      ScheduleTiming gpipe = run("gpipe", p, m, 1, {});
      ScheduleTiming oneFOneB = run("1f1b", p, m, 1, {});
      for (int r = 0; r < p; ++r) {
        INFO("p=" << p << " m=" << m << " r=" << r);
        CHECK(gpipe.peakInflight[r] == m);
        CHECK(oneFOneB.peakInflight[r] == std::min(p - r, m));
      }
    }
  }
}

TEST_CASE("peak chunks in flight, interleaved: w_r + 1 with w_r = 2(p-r-1) + (v-1)p, cap vm",
          "[schedules][closed-form]") {
  for (int p = 1; p <= 5; ++p) {
    for (int v = 2; v <= 4; ++v) {
      for (int m = p; m <= 4 * p; m += p) {
        ScheduleTiming timing = run("interleaved", p, m, v, {});
        for (int r = 0; r < p; ++r) {
          INFO("p=" << p << " m=" << m << " v=" << v << " r=" << r);
          const int warmup = 2 * (p - r - 1) + (v - 1) * p;
          CHECK(timing.peakInflight[r] == std::min(warmup + 1, v * m));
        }
      }
    }
  }
}

TEST_CASE("P2P latency delays every cross-rank hop", "[schedules][closed-form]") {
  // GPipe's critical path runs the forward down and the backward up the ranks,
  // crossing 2(p-1) rank boundaries, each d late.
  TimingOptions options = timesFB(1, 2);
  options.p2pLatency = Rational(1, 4);
  for (int p = 1; p <= 5; ++p) {
    ScheduleTiming timing = run("gpipe", p, 8, 1, options);
    CHECK(timing.makespan == (8 + p - 1) * 3 + 2 * (p - 1) * Rational(1, 4));
  }
}

TEST_CASE("a Megatron-scale pipeline (p=64, m=512) follows the closed forms",
          "[schedules][closed-form]") {
  // GPT-1T as Megatron ran it: 64 stages, 512 microbatches per pipeline.
  ScheduleTiming oneFOneB = run("1f1b", 64, 512, 1, timesFB(1, 2));
  CHECK(oneFOneB.makespan == (512 + 63) * 3);
  ScheduleTiming interleaved = run("interleaved", 64, 512, 2, timesFB(1, 2));
  CHECK(interleaved.makespan == 512 * 3 + Rational(63 * 3, 2));
}
