// The solver's exact shrinking, tested through its internal interface: folding
// keeps the optimum, and the backward pass gives every min-marginal.
#include <catch2/catch.hpp>
#include <cmath>

#include "passes/ShardingSearch.h"
#include "tests/unit/sharding/SolverTestSupport.h"

using meshflow::passes::ShardingProblem;
using namespace meshflow::passes::sharding;
using meshflow::test::randomProblem;

namespace {

// Every choice of the graph, in turn.
template <typename Visit>
void everyChoice(const CostGraph& g, Visit visit) {
  std::vector<int> c(g.nodes(), 0);
  while (true) {
    visit(c);
    int i = 0;
    while (i < g.nodes() && ++c[i] == g.strategies(i)) c[i++] = 0;
    if (i == g.nodes()) return;
  }
}

}  // namespace

TEST_CASE("elimination: min-marginals equal brute force", "[sharding][elimination]") {
  int withResidual = 0;
  for (unsigned seed = 0; seed < 400; ++seed) {
    ShardingProblem p = randomProblem(seed);
    p.memoryBudget.reset();
    CostGraph g = buildCostGraph(p);
    // Keep one node in three sometimes, so that the residual search takes part.
    std::vector<bool> keep(g.nodes(), false);
    for (int i = 0; i < g.nodes(); ++i) keep[i] = seed % 2 == 0 && i % 3 == 1;
    EliminationPlan plan = planElimination(g, keep);
    withResidual += !plan.residual.empty();
    std::vector<std::vector<double>> expected(g.nodes());
    for (int i = 0; i < g.nodes(); ++i) expected[i].assign(g.strategies(i), kInfinity);
    double optimum = kInfinity;
    everyChoice(g, [&](const std::vector<int>& c) {
      double v = g.objective(c);
      optimum = std::min(optimum, v);
      for (int i = 0; i < g.nodes(); ++i) expected[i][c[i]] = std::min(expected[i][c[i]], v);
    });
    // Capped half way between the optimum and the worst marginal, and not at all.
    double worst = 0.0;
    for (const auto& row : expected) {
      for (double v : row) worst = std::isfinite(v) ? std::max(worst, v) : worst;
    }
    for (double cap : {kInfinity, (optimum + worst) / 2}) {
      INFO("seed " << seed << ", cap " << cap);
      StepBudget steps(10000000);
      auto marginals = exactMarginals(plan, g, g.cost, cap, steps);
      REQUIRE(marginals);
      for (int i = 0; i < g.nodes(); ++i) {
        for (int k = 0; k < g.strategies(i); ++k) {
          double want = expected[i][k] <= cap ? expected[i][k] : kInfinity;
          if (std::isinf(want)) {
            CHECK(std::isinf((*marginals)[i][k]));
          } else {
            CHECK((*marginals)[i][k] == Approx(want).margin(1e-9));
          }
        }
      }
    }
  }
  CHECK(withResidual > 50);
}

TEST_CASE("elimination: solveExactly finds the optimum, or the first choice within a cap",
          "[sharding][elimination]") {
  for (unsigned seed = 400; seed < 700; ++seed) {
    ShardingProblem p = randomProblem(seed);
    p.memoryBudget.reset();
    CostGraph g = buildCostGraph(p);
    EliminationPlan plan = planElimination(g, std::vector<bool>(g.nodes(), false));
    double optimum = kInfinity;
    everyChoice(g, [&](const std::vector<int>& c) { optimum = std::min(optimum, g.objective(c)); });
    INFO("seed " << seed);
    ExactOutcome best = solveExactly(plan, g, g.cost, 1000000);
    REQUIRE(best.complete);
    if (std::isinf(optimum)) {
      CHECK_FALSE(best.choice);
      continue;
    }
    REQUIRE(best.choice);
    CHECK(g.objective(*best.choice) == Approx(optimum).margin(1e-9));
    ExactOutcome within = solveExactly(plan, g, g.cost, 1000000, optimum + 1, true);
    REQUIRE(within.choice);
    CHECK(g.objective(*within.choice) <= optimum + 1 + 1e-9);
    CHECK_FALSE(solveExactly(plan, g, g.cost, 1000000, optimum - 1e-6, true).choice);
  }
}
