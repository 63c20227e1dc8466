// CBC's cutoff (MilpLimits::cutoff): the objective of an answer in hand, which
// prunes CBC's tree from the start. Above the optimum CBC still finds and proves
// it; below, CBC proves that nothing is below the cutoff, which the solver reads
// as "the answer in hand is optimal", never as "infeasible".
#include <catch2/catch.hpp>

#include "passes/ShardingMilp.h"

using namespace meshflow::passes::sharding;

namespace {

// Two nodes of two strategies joined by an edge; the optimum is (1, 1) at 3.
Residual twoNodes() {
  Residual r;
  r.nodes = {0, 1};
  r.cost = {{4.0, 2.0}, {3.0, 1.0}};
  r.memory = {{}, {}};
  Matrix m(2, 2);
  m.at(0, 0) = 0.0;
  m.at(0, 1) = 5.0;
  m.at(1, 0) = 5.0;
  m.at(1, 1) = 0.0;
  r.edges.push_back({0, 1, m});
  return r;
}

}  // namespace

TEST_CASE("cbc cutoff: above the optimum, CBC proves it", "[sharding][cbc]") {
  MilpLimits limits;
  limits.cutoff = cutoffAbove(3.0);
  MilpOutcome out = solveResidualMilp(twoNodes(), limits);
  REQUIRE(out.choice);
  CHECK(*out.choice == std::vector<int>{1, 1});
  CHECK(out.optimal);
  CHECK_FALSE(out.infeasible);
  CHECK_FALSE(out.nothingBelowCutoff);
}

TEST_CASE("cbc cutoff: below the optimum, nothing below it is proven, not infeasibility",
          "[sharding][cbc]") {
  MilpLimits limits;
  limits.cutoff = 2.5;
  MilpOutcome out = solveResidualMilp(twoNodes(), limits);
  CHECK_FALSE(out.choice);
  CHECK_FALSE(out.optimal);
  CHECK_FALSE(out.infeasible);
  CHECK(out.nothingBelowCutoff);
  CHECK(out.bound == 2.5);
}

TEST_CASE("cbc cutoff: the cutoff sits just above the answer in hand", "[sharding][cbc]") {
  CHECK(cutoffAbove(3.0) > 3.0);
  CHECK(cutoffAbove(3.0) < 3.0 + 1e-5);
  CHECK(cutoffAbove(0.0) > 0.0);
}
