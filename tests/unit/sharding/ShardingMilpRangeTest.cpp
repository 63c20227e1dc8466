// The MILP handed to CBC keeps to what Clp takes: an objective coefficient of
// 1e25 or more made Clp abort the process (an assertion in ClpSimplex::createRim;
// found by fuzz_sharding with a cost of 1e300). Such a model is not solved by
// CBC (outOfRange); the fast path answers the problem alone.
#include <catch2/catch.hpp>

#include <limits>

#include "passes/ShardingCbc.h"

namespace sharding = meshflow::passes::sharding;

TEST_CASE("a model with coefficients past Clp's range is not handed to CBC", "[sharding][cbc]") {
  sharding::Milp milp;
  const int row = milp.addRow(1, 1);
  milp.addColumn(1e300, 1, true, {{row, 1.0}});
  milp.addColumn(2.0, 1, true, {{row, 1.0}});
  CHECK_FALSE(milp.withinClpRange());
  const sharding::MilpResult r = milp.solve({});
  CHECK(r.outOfRange);
  CHECK_FALSE(r.values);
  CHECK_FALSE(r.optimal);
}

TEST_CASE("a model within Clp's range is solved, infinite bounds included", "[sharding][cbc]") {
  sharding::Milp milp;
  const int row = milp.addRow(1, std::numeric_limits<double>::infinity());
  milp.addColumn(3.0, 1, true, {{row, 1.0}});
  milp.addColumn(2.0, 1, true, {{row, 1.0}});
  CHECK(milp.withinClpRange());
  const sharding::MilpResult r = milp.solve({});
  CHECK_FALSE(r.outOfRange);
  REQUIRE(r.values);
  CHECK(r.optimal);
  CHECK((*r.values)[1] == Approx(1.0));
  CHECK((*r.values)[0] == Approx(0.0));
}
