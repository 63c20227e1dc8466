// passes/planner/LayerCosts.h: a layer's memory-lean solve can look at the
// memory a stage holds, the activations of every microbatch in flight
// included (the planner's second search, when the first finds nothing). Counting
// one microbatch's activations only, a layer whose resident state and one
// microbatch fit its share of the budget kept its fastest strategies even when
// the microbatches in flight did not fit (Llama 3 405B on 16,384 GPUs: refused
// with 218 GiB per device where the lean strategies hold 64.5 GiB; bench/README.md).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "ir/Cluster.h"
#include "passes/Planner.h"
#include "passes/planner/LayerCosts.h"
#include "passes/planner/MeshConfigs.h"
#include "tests/unit/graph/GraphBuilder.h"

namespace meshflow {
namespace {

double resident(const passes::LayerCost& c) { return c.weights + c.gradients + c.optimizerState; }

TEST_CASE("a lean layer cost fits the activations of every microbatch in flight",
          "[planning][memory]") {
  const ir::Graph forward = test::buildGpt({4, 256, 8, 128, 1024});
  const ir::Cluster cluster = ir::p3_16xlarge(2);  // 16 devices
  const passes::LayerClustering layers = passes::planLayers(forward, 0);
  const std::vector<passes::MeshConfig> configs = passes::meshConfigs(cluster, {});
  // Stages of 4 devices viewed as 2x2: the cluster holds 4 of them, so with 4
  // microbatches the first stage holds all 4 at once.
  const auto config = std::find_if(configs.begin(), configs.end(), [](const passes::MeshConfig& c) {
    return c.shape.devices() == 4 && c.view[0] == 2;
  });
  REQUIRE(config != configs.end());
  const int index = int(config - configs.begin());
  const std::int64_t microbatch = 8;  // 4 samples per data-parallel row
  const int microbatches = 4, inFlight = 4, layer = 1;
  const double syncWeight = 1.0 / microbatches;

  passes::LayerCostOptions unbounded;
  unbounded.devices = cluster.deviceCount();
  passes::LayerCostTable fastestTable(forward, layers, cluster.device, unbounded);
  const auto fastest = *fastestTable.cost(layer, index, *config, microbatch, syncWeight);
  REQUIRE(fastest.activations > 0);
  auto held = [&](const passes::LayerCost& c) { return resident(c) + inFlight * c.activations; };

  // A budget whose per-layer share holds the fastest strategies with two
  // microbatches' activations, not with the four in flight.
  passes::LayerCostOptions bounded = unbounded;
  const int stages = int(cluster.deviceCount() / config->shape.devices());
  const double layersPerStage = std::ceil(double(fastestTable.layerCount()) / stages);
  bounded.memoryBudget = (resident(fastest) + 2 * fastest.activations) * layersPerStage;
  passes::LayerCostTable table(forward, layers, cluster.device, bounded);
  // Counting one microbatch, the fastest strategies pass: the lean cost is theirs.
  const auto one = *table.cost(layer, index, *config, microbatch, syncWeight, true);
  CHECK(held(one) == held(fastest));
  // Counting the four in flight (the planner's second search), they do not.
  REQUIRE(table.countMicrobatchesInFlight());
  CHECK_FALSE(table.countMicrobatchesInFlight());
  const auto lean = *table.cost(layer, index, *config, microbatch, syncWeight, true);
  CHECK(held(lean) < held(fastest));
  // Memory bought with time.
  CHECK(lean.forward + lean.backward > fastest.forward + fastest.backward);
}

TEST_CASE("the leanest layer cost is the same under every budget and no larger than a lean one",
          "[planning][memory]") {
  const ir::Graph forward = test::buildGpt({4, 256, 8, 128, 1024});
  const ir::Cluster cluster = ir::p3_16xlarge(2);
  const passes::LayerClustering layers = passes::planLayers(forward, 0);
  const std::vector<passes::MeshConfig> configs = passes::meshConfigs(cluster, {});
  const auto config = std::find_if(configs.begin(), configs.end(), [](const passes::MeshConfig& c) {
    return c.shape.devices() == 4 && c.view[0] == 2;
  });
  REQUIRE(config != configs.end());
  const int index = int(config - configs.begin()), layer = 1, inFlight = 4;
  const std::int64_t microbatch = 8;
  const double syncWeight = 1.0 / 4;
  auto held = [&](const passes::LayerCost& c) { return resident(c) + inFlight * c.activations; };
  auto table = [&](double budget) {
    passes::LayerCostOptions options;
    options.devices = cluster.deviceCount();
    options.memoryBudget = budget;
    return std::make_unique<passes::LayerCostTable>(forward, layers, cluster.device, options);
  };
  const auto fastest = *table(0)->cost(layer, index, *config, microbatch, syncWeight);
  // A budget whose share the fastest strategies overflow: the in-flight lean
  // solve trades some time for memory, priced by that share.
  const double tight = held(fastest) * 0.5;
  auto inFlight50 = table(tight);
  inFlight50->countMicrobatchesInFlight();
  const auto lean = *inFlight50->cost(layer, index, *config, microbatch, syncWeight, true);
  // The leanest under that budget, under twice it and with no budget at all.
  std::vector<double> leanest;
  for (double budget : {tight, 2 * tight, 0.0}) {
    auto t = table(budget);
    REQUIRE(t->priceLeanest());
    CHECK_FALSE(t->priceLeanest());
    leanest.push_back(held(*t->cost(layer, index, *config, microbatch, syncWeight, true)));
  }
  CHECK(leanest[0] == leanest[1]);
  CHECK(leanest[0] == leanest[2]);
  CHECK(leanest[0] <= held(lean));
  CHECK(leanest[0] < held(fastest));
}

}  // namespace
}  // namespace meshflow
