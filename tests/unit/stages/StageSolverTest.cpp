// Hand-checked stage problems: small enough to work out on paper.
#include <catch2/catch.hpp>

#include "passes/StageSolver.h"

namespace meshflow::passes {
namespace {

constexpr double kInf = StageProblem::kInfeasible;

// Two layers on two devices of one node: two one-device stages of latency 1
// each, or one two-device stage of latency 1.5.
StageProblem twoLayers(int microbatches) {
  StageProblem p = StageProblem::make(2, microbatches, 1, 2, {{1, 1}, {1, 2}}, 1);
  p.at(0, 0, 0, 0) = 1;
  p.at(1, 1, 0, 0) = 1;
  p.at(0, 1, 1, 0) = 1.5;
  return p;
}

TEST_CASE("one layer on one device costs B times its latency", "[stages]") {
  StageProblem p = StageProblem::make(1, 4, 1, 1, {{1, 1}}, 1);
  p.at(0, 0, 0, 0) = 5;
  StageSolution s = solveStages(p);
  CHECK(s.cost == 20);
  REQUIRE(s.stages.size() == 1);
  CHECK(s.stages[0] == Stage{0, 1, 0, 0, 5});
}

TEST_CASE("many microbatches favour the pipeline, one favours the big stage", "[stages]") {
  // B = 4: pipeline 1 + 1 + 3·1 = 5 against 1.5 + 3·1.5 = 6.
  StageSolution pipelined = solveStages(twoLayers(4));
  CHECK(pipelined.cost == 5);
  CHECK(pipelined.latencySum == 2);
  CHECK(pipelined.maxLatency == 1);
  CHECK(pipelined.stages == std::vector<Stage>{{0, 1, 0, 0, 1}, {1, 2, 0, 0, 1}});

  // B = 1: the objective is the plain sum, 2 against 1.5.
  StageSolution single = solveStages(twoLayers(1));
  CHECK(single.cost == 1.5);
  CHECK(single.stages == std::vector<Stage>{{0, 2, 1, 0, 1.5}});
}

TEST_CASE("max_n_succ_stages can forbid the pipeline", "[stages]") {
  StageProblem p = twoLayers(4);
  p.maxSuccStages.assign(p.cost.size(), StageProblem::kUnlimited);
  // The first stage may have no successor: it cannot hold only layer 0.
  p.maxSuccStages[p.index(0, 0, 0, 0)] = 0;
  StageSolution s = solveStages(p);
  CHECK(s.cost == 6);
  CHECK(s.stages == std::vector<Stage>{{0, 2, 1, 0, 1.5}});
}

TEST_CASE("the cheapest config is chosen per stage", "[stages]") {
  StageProblem p = StageProblem::make(1, 2, 1, 2, {{1, 2}}, 3);
  p.at(0, 0, 0, 0) = 4;
  p.at(0, 0, 0, 1) = 3;
  p.at(0, 0, 0, 2) = kInf;
  StageSolution s = solveStages(p);
  CHECK(s.cost == 6);
  CHECK(s.stages[0].config == 1);
}

TEST_CASE("the bottleneck trade-off: a slower sum with a smaller max wins", "[stages]") {
  // Four layers on 1×4. One stage on (1,4): latency 4 (no speed-up past two
  // devices). Two stages of two layers on (1,2): 2.5 each. Four stages on (1,1): 1.2 each.
  StageProblem p = StageProblem::make(4, 10, 1, 4, {{1, 1}, {1, 2}, {1, 4}}, 1);
  p.at(0, 3, 2, 0) = 4;
  p.at(0, 1, 1, 0) = 2.5;
  p.at(2, 3, 1, 0) = 2.5;
  for (int l = 0; l < 4; ++l) p.at(l, l, 0, 0) = 1.25;
  // 4 + 9·4 = 40; 5 + 9·2.5 = 27.5; 5 + 9·1.25 = 16.25.
  StageSolution s = solveStages(p);
  CHECK(s.cost == 16.25);
  CHECK(s.stages.size() == 4);
  // With one microbatch the sums decide: 4 < 5 = 5, so the single stage.
  p.microbatches = 1;
  CHECK(solveStages(p).cost == 4);
}

TEST_CASE("whole-node submeshes are counted in nodes", "[stages]") {
  // 2×4 cluster, whole-node shapes only: two stages of one node each, or one of two.
  StageProblem p = StageProblem::make(2, 3, 2, 4, {{1, 4}, {2, 4}}, 1);
  p.at(0, 0, 0, 0) = 2;
  p.at(1, 1, 0, 0) = 3;
  p.at(0, 1, 1, 0) = 4;
  // 5 + 2·3 = 11 against 4 + 2·4 = 12.
  StageSolution s = solveStages(p);
  CHECK(s.cost == 11);
  CHECK(s.stages == std::vector<Stage>{{0, 1, 0, 0, 2}, {1, 2, 0, 0, 3}});
}

TEST_CASE("no feasible plan says why when it can", "[stages][errors]") {
  SECTION("a layer no stage can hold") {
    StageProblem p = StageProblem::make(2, 1, 1, 1, {{1, 1}}, 1);
    p.at(0, 0, 0, 0) = 1;
    REQUIRE_THROWS_WITH(solveStages(p),
                        "no feasible plan: no stage that holds layer 1 is feasible on any submesh");
  }
  SECTION("too few layers for the devices") {
    StageProblem p = StageProblem::make(1, 1, 1, 4, {{1, 1}, {1, 2}}, 1);
    p.at(0, 0, 0, 0) = 1;
    p.at(0, 0, 1, 0) = 1;
    REQUIRE_THROWS_WITH(solveStages(p),
                        Catch::StartsWith("no feasible plan: the cluster's 4 devices cannot be "
                                          "split into at most 1 submeshes"));
  }
  SECTION("memory limits") {
    StageProblem p = StageProblem::make(2, 1, 1, 2, {{1, 1}}, 1);
    p.at(0, 0, 0, 0) = 1;
    p.at(1, 1, 0, 0) = 1;
    p.maxSuccStages.assign(p.cost.size(), 0);
    REQUIRE_THROWS_WITH(solveStages(p), Catch::Contains("max_n_succ_stages"));
  }
  SECTION("layers and devices each coverable, not together") {
    StageProblem p = StageProblem::make(2, 1, 1, 2, {{1, 1}, {1, 2}}, 1);
    p.at(0, 0, 0, 0) = 1;
    p.at(1, 1, 1, 0) = 1;
    REQUIRE_THROWS_WITH(solveStages(p),
                        "no feasible plan: no sequence of feasible stages covers "
                        "layers 0..1 with submeshes that take exactly 2 devices");
  }
}

TEST_CASE("invalid problems name the field", "[stages][errors]") {
  StageProblem p = StageProblem::make(1, 1, 2, 4, {{1, 4}, {2, 2}}, 1);
  REQUIRE_THROWS_WITH(solveStages(p),
                      "submeshes[1]: (2, 2) spans nodes without taking whole nodes (use (n, M))");
  p = StageProblem::make(1, 1, 1, 6, {{1, 2}, {1, 3}}, 1);
  REQUIRE_THROWS_WITH(solveStages(p), Catch::StartsWith("submeshes[0] and submeshes[1]: sizes 2 "
                                                        "and 3 do not divide one another"));
  p = StageProblem::make(2, 1, 1, 1, {{1, 1}}, 1);
  p.at(0, 1, 0, 0) = -1;
  REQUIRE_THROWS_WITH(solveStages(p), "cost[0][1][0][0]: expected a latency >= 0, got -1");
  p.cost.pop_back();
  REQUIRE_THROWS_WITH(solveStages(p), "cost: expected 4 entries (L·L·S·G), got 3");
}

TEST_CASE("t_max pruning skips most caps on a larger table", "[stages]") {
  // 24 layers, 1×8, Alpa's shapes, costs that scale sub-linearly with devices.
  std::vector<SubmeshShape> shapes = {{1, 1}, {1, 2}, {1, 4}, {1, 8}};
  StageProblem p = StageProblem::make(24, 16, 1, 8, shapes, 2);
  for (int i = 0; i < 24; ++i)
    for (int j = i; j < 24; ++j)
      for (int s = 0; s < 4; ++s)
        for (int g = 0; g < 2; ++g) {
          double work = (j - i + 1) * (1.0 + 0.1 * ((i * 7 + j) % 5));
          int devices = shapes[s].devices();
          p.at(i, j, s, g) = work / devices * (1.0 + 0.05 * devices + 0.1 * g);
        }
  StageSolution s = solveStages(p);
  CHECK(s.dpRuns < s.distinctCosts / 10);
  CHECK(s.stages.size() >= 2);
}

// The first DP run (no cap) finds the one-stage plan of cost 6; only the run at
// t_max = 1 finds the pipeline of cost 5.
TEST_CASE("a spent time budget returns the best plan found, not proven", "[stages][budget]") {
  StageSolution bounded = solveStages(twoLayers(4), {.timeBudgetSeconds = 0.0});
  CHECK_FALSE(bounded.optimal);
  CHECK(bounded.dpRuns == 1);
  CHECK(bounded.cost == 6);
  CHECK(bounded.stages == std::vector<Stage>{{0, 2, 1, 0, 1.5}});

  StageSolution exact = solveStages(twoLayers(4), {.timeBudgetSeconds = 60.0});
  CHECK(exact.optimal);
  CHECK(exact.cost == 5);
}

TEST_CASE("a cancelled control stops the stage solver at its first DP run", "[stages][budget]") {
  PlanControl control;
  control.begin();
  control.cancel();
  try {
    solveStages(twoLayers(4), {.control = &control});
    FAIL("solveStages ran to the end");
  } catch (const PlanInterrupted& stopped) {
    CHECK(stopped.reason() == PlanInterrupted::Reason::kCancelled);
  }
}

}  // namespace
}  // namespace meshflow::passes
