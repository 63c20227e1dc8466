// Zero-bubble schedules: ZB-H1's bubble is a third of 1F1B's at the same memory,
// ZB-V's is close to zero at 1F1B's activation memory.
#include <algorithm>
#include <catch2/catch.hpp>

#include "passes/schedules/ScheduleTiming.h"
#include "passes/schedules/Schedules.h"

using meshflow::passes::buildSchedule;
using meshflow::passes::Rational;
using meshflow::passes::ScheduleTiming;
using meshflow::passes::timeSchedule;
using meshflow::passes::TimingOptions;

namespace {

// The paper's T_F = T_B = T_W, where its B is the input gradient only: here B is
// the whole backward (I + W), so t_F = t_I = t_W = 1 is F=1, B=2, W=1.
TimingOptions equalPasses(Rational t = 1) {
  TimingOptions options;
  options.times = {t, 2 * t, t};
  return options;
}

ScheduleTiming run(const std::string& kind, int p, int m, const TimingOptions& options) {
  return timeSchedule(buildSchedule({kind, p, m, 0, 0}), options);
}

}  // namespace

TEST_CASE("ZB-H1's bubble is one third of 1F1B's when t_F = t_I = t_W",
          "[schedules][zero-bubble]") {
  for (Rational t : {Rational(1), Rational(3, 2)}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = p; m <= 3 * p + 2; ++m) {
        INFO("p=" << p << " m=" << m << " t=" << t.toString());
        ScheduleTiming oneFOneB = run("1f1b", p, m, equalPasses(t));
        ScheduleTiming zb = run("zb-h1", p, m, equalPasses(t));
        CHECK(3 * zb.totalIdle() == oneFOneB.totalIdle());
        // Every rank idles (p-1)·t_F: the paper's (p-1)(T_F + T_B - T_W).
        CHECK(zb.makespan == 3 * m * t + (p - 1) * t);
        for (int r = 0; r < p; ++r) CHECK(zb.idle(r) == (p - 1) * t);
      }
    }
  }
}

TEST_CASE("ZB-H1 with fewer microbatches than stages still beats 1F1B",
          "[schedules][zero-bubble]") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = 1; m < p; ++m) {
      INFO("p=" << p << " m=" << m);
      CHECK(run("zb-h1", p, m, equalPasses()).makespan < run("1f1b", p, m, equalPasses()).makespan);
    }
  }
}

TEST_CASE("ZB-H1 holds no more activations than 1F1B", "[schedules][zero-bubble]") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 12; ++m) {
      CHECK(run("zb-h1", p, m, {}).peakInflight == run("1f1b", p, m, {}).peakInflight);
    }
  }
}

TEST_CASE("ZB-V: bubble (p-1)·t_F/2 per rank, far below ZB-H1's, at 1F1B's memory",
          "[schedules][zero-bubble]") {
  for (int p = 1; p <= 8; ++p) {
    for (int m = 2 * p - 1; m <= 2 * p + 6; ++m) {
      INFO("p=" << p << " m=" << m);
      ScheduleTiming zbv = run("zbv", p, m, equalPasses());
      // Only the first forward's trip down the V is left idle: p-1 half-stage forwards.
      CHECK(zbv.makespan == 3 * m + Rational(p - 1, 2));
      if (p > 1) CHECK(zbv.totalIdle() < run("zb-h1", p, m, equalPasses()).totalIdle());
      // A chunk holds half a stage's activations: 2p chunks in flight is p stages,
      // rank 0's 1F1B peak.
      for (int peak : zbv.peakInflight) CHECK(peak <= 2 * p);
    }
  }
}

TEST_CASE("ZB kinds run I for B - W and W for W", "[schedules][zero-bubble]") {
  TimingOptions options;
  options.times = {1, 3, 1};
  ScheduleTiming timing = run("zb-h1", 1, 1, options);
  REQUIRE(timing.ranks[0].size() == 3);
  CHECK(timing.ranks[0][1].end - timing.ranks[0][1].start == 2);
  CHECK(timing.ranks[0][2].end - timing.ranks[0][2].start == 1);
  CHECK(timing.makespan == 4);
}
