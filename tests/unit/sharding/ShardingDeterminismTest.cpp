// The solver's answer depends on the problem alone: not on the run, not on the
// path that found the optimum (branch and bound, CBC, the Lagrangian search), and
// not on how the problem is written (edge order and direction, parallel edges).
#include <catch2/catch.hpp>
#include <cmath>

#include "passes/ShardingSolver.h"
#include "tests/unit/sharding/SolverTestSupport.h"

using meshflow::passes::ShardingProblem;
using meshflow::passes::ShardingSolution;
using meshflow::passes::SolveOptions;
using meshflow::passes::solveSharding;
using namespace meshflow::test;

namespace {

SolveOptions cbcOnly() {
  SolveOptions o;
  o.searchLimit = 0;
  return o;
}

}  // namespace

TEST_CASE("determinism: the same problem gives the same answer on every path",
          "[sharding][determinism]") {
  for (unsigned seed = 2000; seed < 2100; ++seed) {
    for (Budget budget : {Budget::kSometimes, Budget::kAlways}) {
      ShardingProblem p = randomProblem(seed, budget);
      if (!bruteForce(p)) continue;
      INFO("seed " << seed);
      ShardingSolution a = solveSharding(p, {});
      ShardingSolution b = solveSharding(p, {});
      ShardingSolution c = solveSharding(p, cbcOnly());
      CHECK(a.choice == b.choice);
      CHECK(a.objective == b.objective);
      CHECK(a.choice == c.choice);
    }
  }
}

TEST_CASE("determinism: rewriting the edges does not change the answer",
          "[sharding][determinism]") {
  for (unsigned seed = 5000; seed < 5300; ++seed) {
    for (Budget budget : {Budget::kSometimes, Budget::kAlways}) {
      ShardingProblem p = randomProblem(seed, budget);
      if (!bruteForce(p)) continue;
      INFO("seed " << seed);
      ShardingSolution a = solveSharding(p, {});
      CHECK(solveSharding(rewritten(p, seed), {}).choice == a.choice);
      CHECK(solveSharding(rewritten(p, seed + 1), cbcOnly()).choice == a.choice);
    }
  }
}

TEST_CASE("determinism: large budgeted problems with many equal optima",
          "[sharding][determinism][budget]") {
  for (unsigned seed : {1u, 2u, 3u}) {
    ShardingProblem p = withTies(transformerProblem(2, 6, seed, 0.3));
    INFO("seed " << seed);
    ShardingSolution a = solveSharding(p, {});
    REQUIRE(a.optimal);
    for (unsigned k = 0; k < 3; ++k) {
      ShardingSolution b = solveSharding(rewritten(p, 10 * seed + k), {});
      CHECK(b.choice == a.choice);
      CHECK(b.objective == Approx(a.objective));
    }
    // Canonical: no node can take a lower strategy at the same objective.
    for (size_t i = 0; i < a.choice.size(); ++i) {
      for (int k = 0; k < a.choice[i]; ++k) CHECK(a.alternatives[i][k] > a.objective + 1e-9);
    }
  }
}
