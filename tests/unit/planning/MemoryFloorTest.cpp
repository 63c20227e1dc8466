// passes/MemoryFloor.h: the memory a refused request needs is a plan's, and
// the budget just below it is refused; the model facts the exports read.
#include <catch2/catch.hpp>

#include "ir/Cluster.h"
#include "passes/MemoryFloor.h"
#include "passes/PlanFacts.h"
#include "tests/unit/graph/GraphBuilder.h"

namespace meshflow {
namespace {

bool plans(const ir::Graph& forward, const ir::Cluster& cluster, passes::PlanRequest request,
           double budget) {
  request.memoryPerDevice = budget;
  try {
    passes::planTraining(forward, cluster, request);
    return true;
  } catch (const passes::PlanningError&) {
    return false;
  }
}

TEST_CASE("the memory floor is a plan's peak and nothing fits below its bracket",
          "[planning][memory]") {
  ir::Graph forward = test::buildGpt({2, 128, 4, 64, 512});
  ir::Cluster cluster = ir::p3_16xlarge(1);
  cluster.devicesPerNode = 4;
  passes::PlanRequest request;
  request.globalBatch = 16;
  request.memoryPerDevice = 1e5;  // 100 KB: nothing fits
  REQUIRE_FALSE(plans(forward, cluster, request, 1e5));
  auto floor = passes::memoryFloor(forward, cluster, request);
  REQUIRE(floor);
  CHECK(floor->tooSmall < floor->fits);
  CHECK(floor->fits <= floor->tooSmall * 1.02);
  CHECK(plans(forward, cluster, request, floor->fits));
  CHECK_FALSE(plans(forward, cluster, request, floor->tooSmall));

  // Without recomputation the leanest plan needs at least as much.
  passes::PlanRequest none = request;
  none.recompute = "none";
  auto without = passes::memoryFloor(forward, cluster, none);
  REQUIRE(without);
  CHECK(without->fits >= floor->tooSmall);
}

TEST_CASE("the model's facts come from its forward graph", "[planning][facts]") {
  ir::ModelFacts facts = passes::modelFacts(test::buildGpt({3, 256, 8, 128, 1024}));
  CHECK(facts.blocks == 3);
  CHECK(facts.hidden == 256);
  CHECK(facts.heads == 8);
  CHECK(facts.sequence == 128);
  CHECK(facts.precision == "fp32");
}

}  // namespace
}  // namespace meshflow
