// The planner (passes/Planner.h) on small traced GPTs: valid plans, every hint
// honoured, clear errors for impossible requests, determinism, and the free
// search never worse than a hand plan inside its space.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "interp/Tracing.h"
#include "tests/unit/TracedModel.h"
#include "ir/Plan.h"
#include "meshflow/meshflow.h"
#include "passes/Planner.h"
#include "passes/planner/Exclusions.h"
#include "passes/planner/LayerSubgraph.h"
#include "passes/planner/ScopeLayers.h"

using namespace meshflow;
using passes::PlanRequest;

namespace {

ir::Graph traced(const std::string& model) { return test::tracedModel(model); }

const ir::Graph& smallGpt() {
  static const ir::Graph g =
      traced("gpt(layers = 4, hidden = 256, heads = 4, seq = 64, vocab = 512)");
  return g;
}

// Two nodes of four devices, an A100-like device with a small memory.
ir::Cluster cluster(double memory = 8e9) {
  ir::Cluster c;
  c.nodes = 2;
  c.devicesPerNode = 4;
  c.device = {"test-gpu", memory, 100e12, 1e12};
  c.intraNode = {100e9, 2e-6};
  c.interNode = {20e9, 10e-6};
  return c;
}

PlanRequest request(std::int64_t batch = 32) {
  PlanRequest r;
  r.globalBatch = batch;
  return r;
}

// The invariants every plan keeps.
void checkValid(const ir::Plan& p, const ir::Cluster& c, int layers) {
  REQUIRE(!p.stages.empty());
  CHECK(p.stages.front().firstLayer == 0);
  CHECK(p.stages.back().endLayer == layers);
  for (std::size_t k = 1; k < p.stages.size(); ++k)
    CHECK(p.stages[k].firstLayer == p.stages[k - 1].endLayer);
  std::multiset<int> used;
  for (int r = 0; r < p.pipelineRanks(); ++r) {
    const ir::PlanStage& s = p.stages[r];
    CHECK(s.logicalMesh[0] * s.logicalMesh[1] == s.submesh[0] * s.submesh[1]);
    CHECK(std::int64_t(s.devices.size()) == s.submesh[0] * s.submesh[1]);
    used.insert(s.devices.begin(), s.devices.end());
  }
  CHECK(std::int64_t(used.size()) == c.deviceCount());
  CHECK(std::set<int>(used.begin(), used.end()).size() == used.size());
  CHECK(p.stepTime > 0);
  CHECK(p.tflopsPerDevice > 0);
  CHECK(p.mfu > 0);
  CHECK(p.mfu < 1);
  CHECK(p.peakMemoryBytes() <= c.device.memoryBytes);
  CHECK(p.globalBatch % p.microbatches == 0);
  for (const ir::PlanStage& s : p.stages) CHECK(!s.strategies.empty());
}

int layerCount(const ir::Plan& p) { return p.stages.back().endLayer; }

}  // namespace

TEST_CASE("the planner gives a valid, deterministic plan", "[planner]") {
  ir::Plan p = passes::planTraining(smallGpt(), cluster(), request());
  // Scope layers: the embedding joins block0, the head stands alone: 5 layers.
  CHECK(layerCount(p) == 5);
  checkValid(p, cluster(), 5);
  ir::Plan again = passes::planTraining(smallGpt(), cluster(), request());
  CHECK(ir::planToJson(p).dump() == ir::planToJson(again).dump());
  CHECK(ir::planFromJson(ir::planToJson(p)) == p);
}

TEST_CASE("every op of the model gets a strategy in exactly one stage", "[planner]") {
  ir::Plan p = passes::planTraining(smallGpt(), cluster(), request());
  std::set<ir::OpId> seen;
  for (const ir::PlanStage& s : p.stages)
    for (const ir::OpStrategy& st : s.strategies) CHECK(seen.insert(st.op).second);
  CHECK(seen.size() == smallGpt().ops().size());
}

TEST_CASE("schedule hints are honoured", "[planner]") {
  const ir::Cluster c = cluster();
  SECTION("microbatches and pipeline") {
    PlanRequest r = request();
    r.microbatches = 4;
    r.schedule = ir::ScheduleKind::kGPipe;
    ir::Plan p = passes::planTraining(smallGpt(), c, r);
    CHECK(p.microbatches == 4);
    CHECK(p.schedule == ir::ScheduleKind::kGPipe);
    checkValid(p, c, 5);
  }
  SECTION("stages, tensor and data parallelism") {
    PlanRequest r = request();
    r.stages = 2;
    r.maxTensorParallel = 2;
    r.dataParallel = 2;
    ir::Plan p = passes::planTraining(smallGpt(), c, r);
    REQUIRE(p.pipelineRanks() == 2);
    for (const ir::PlanStage& s : p.stages) {
      CHECK(s.logicalMesh[0] == 2);
      CHECK(s.logicalMesh[1] <= 2);
    }
    checkValid(p, c, 5);
  }
  SECTION("interleaved with virtual stages") {
    PlanRequest r = request();
    r.stages = 2;
    r.schedule = ir::ScheduleKind::kInterleaved;
    r.virtualStages = 2;
    r.microbatches = 8;
    ir::Plan p = passes::planTraining(smallGpt(), c, r);
    CHECK(p.chunks == 2);
    CHECK(p.stages.size() == 4);
    CHECK(p.pipelineRanks() == 2);
  }
  SECTION("recompute") {
    PlanRequest r = request();
    r.recompute = "full";
    ir::Plan p = passes::planTraining(smallGpt(), c, r);
    for (const ir::PlanStage& s : p.stages) CHECK(s.costs.recompute == "full");
  }
  SECTION("recompute: RUN R is priced as the one layer the runtime reruns ahead") {
    // One stage of all five layers: the backward reruns each layer's forward
    // right before that layer's backward, and RUN R only the last one's
    // (passes/Recomputation.h); the rest stays in backwardSeconds.
    PlanRequest r = request();
    r.recompute = "full";
    r.stages = 1;
    ir::Plan p = passes::planTraining(smallGpt(), c, r);
    REQUIRE(p.stages.size() == 1);
    const ir::StageCosts& costs = p.stages[0].costs;
    INFO("R " << costs.recomputeSeconds << " s, forward " << costs.forwardSeconds << " s");
    CHECK(costs.recomputeSeconds > 0);
    CHECK(costs.recomputeSeconds < 0.5 * costs.forwardSeconds);
    CHECK(costs.backwardSeconds > costs.forwardSeconds + costs.recomputeSeconds);
  }
  SECTION("a layer pin") {
    PlanRequest r = request();
    r.stages = 2;
    r.layerPins = {{1, 3, 0}};  // blocks 1 and 2 with block 0 in the first stage
    ir::Plan p = passes::planTraining(smallGpt(), c, r);
    REQUIRE(p.pipelineRanks() == 2);
    CHECK(p.stages.front().endLayer >= 3);
    r.layerPins = {{0, 2, 1}};  // stage 1 cannot hold layer 0: stage 0 would be empty
    CHECK_THROWS_AS(passes::planTraining(smallGpt(), c, r), passes::PlanningError);
  }
  SECTION("an op sharding pin") {
    PlanRequest r = request();
    r.stages = 1;
    r.opPins = {{"block*.mlp.fc1", "RRS1"}};
    ir::Plan p = passes::planTraining(smallGpt(), c, r);
    int pinned = 0;
    for (const ir::OpStrategy& s : p.stages.front().strategies)
      if (s.scope.find(".mlp.fc1") != std::string::npos && s.kind == "matmul") {
        CHECK(s.outputs.front().substr(0, 4) == "RRS1");
        ++pinned;
      }
    CHECK(pinned > 0);
  }
  SECTION("a device pin") {
    PlanRequest r = request();
    r.stages = 2;
    r.devicePins = {{0, {5}}};
    ir::Plan p = passes::planTraining(smallGpt(), c, r);
    const auto& d = p.stages.front().devices;
    CHECK(std::find(d.begin(), d.end(), 5) != d.end());
  }
  SECTION("a memory bound") {
    PlanRequest r = request();
    ir::Plan free = passes::planTraining(smallGpt(), c, r);
    r.memoryPerDevice = free.peakMemoryBytes() / 2;
    ir::Plan tight = passes::planTraining(smallGpt(), c, r);
    CHECK(tight.peakMemoryBytes() <= *r.memoryPerDevice);
  }
}

TEST_CASE("impossible requests are errors naming the hint", "[planner]") {
  auto hintOf = [](const PlanRequest& r) {
    try {
      passes::planTraining(smallGpt(), cluster(), r);
    } catch (const passes::PlanningError& e) {
      INFO(e.what());
      CHECK(std::string(e.what()).size() > 20);
      return e.hint();
    }
    return std::string("no error");
  };
  PlanRequest r = request();
  r.memoryPerDevice = 1e5;
  CHECK(hintOf(r) == "memory_per_device");
  r = request();
  r.microbatches = 5;
  CHECK(hintOf(r) == "microbatches");
  r = request();
  r.stages = 3;
  CHECK(hintOf(r) == "stages");
  r = request();
  r.dataParallel = 16;
  CHECK(hintOf(r) == "data_parallel");
  r = request();
  r.layerPins = {{0, 9, 0}};
  CHECK(hintOf(r) == "pin(layers = 0..9, stage = 0)");
  r = request();
  r.opPins = {{"block*", "S0S0"}};
  CHECK(hintOf(r) == "pin(op = \"block*\", sharding = \"S0S0\")");
  r = request();
  r.recompute = "sometimes";
  CHECK(hintOf(r) == "recompute");
}

TEST_CASE("exclusions shrink the cluster to the nodes they leave whole", "[planner]") {
  ir::Cluster c = cluster();
  c.nodes = 4;  // devices 0-15
  PlanRequest r = request();
  r.exclusions = {{true, {1}}, {false, {13}}};
  passes::UsableDevices usable = passes::usableDevices(c, r);
  CHECK(usable.cluster.nodes == 2);
  CHECK(usable.cluster.devicesPerNode == 4);
  CHECK(usable.nodes == std::vector<int>{0, 2});
  CHECK(usable.idle == std::vector<int>{12, 14, 15});
  CHECK(usable.excludedCount == 5);
  CHECK(usable.physical(5) == 9);
  CHECK(usable.planning(9) == 5);
  CHECK_FALSE(usable.planning(4));
  CHECK_FALSE(usable.planning(12));

  // The plan uses nodes 0 and 2 only; a stage of both spans node 1.
  r.stages = 1;
  ir::Plan p = passes::planTraining(smallGpt(), c, r);
  REQUIRE(p.stages.size() == 1);
  CHECK(p.stages[0].devices == std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11});
  CHECK(std::any_of(p.notes.begin(), p.notes.end(), [](const std::string& n) {
    return n.find("planned on 2 of the 4 nodes (0, 2)") != std::string::npos;
  }));

  // Pins name physical devices and get them.
  r.stages = 2;
  r.devicePins = {{0, {9}}};
  p = passes::planTraining(smallGpt(), c, r);
  const auto& d = p.stages[0].devices;
  CHECK(std::find(d.begin(), d.end(), 9) != d.end());
}

TEST_CASE("exclusions the planner cannot honour are errors naming them", "[planner]") {
  ir::Cluster c = cluster();  // 2 nodes of 4
  auto errorOf = [&](PlanRequest r) -> std::pair<std::string, std::string> {
    try {
      passes::planTraining(smallGpt(), c, r);
    } catch (const passes::PlanningError& e) {
      return {e.hint(), e.what()};
    }
    return {"no error", ""};
  };
  PlanRequest r = request();
  r.exclusions = {{false, {8}}};
  CHECK(errorOf(r) == std::pair<std::string, std::string>{
                          "exclude(devices = [8])",
                          "exclude(devices = [8]): device 8 is not in the 8-device cluster "
                          "(devices 0-7)"});
  r.exclusions = {{true, {2}}};
  CHECK(errorOf(r).second ==
        "exclude(nodes = [2]): node 2 is not in the 2-node cluster (nodes 0-1)");
  r.exclusions = {{false, {0}}, {false, {4}}};
  CHECK(errorOf(r) ==
        std::pair<std::string, std::string>{
            "exclude(devices = [0])",
            "no node is left to plan on: exclude(devices = [0]), exclude(devices = [4]) touch all "
            "2 nodes of the 2x4 cluster, and the planner uses only nodes no exclusion touches "
            "(devices 1-3, 5-7 would stay idle)"});
  r.exclusions = {{true, {1}}};
  r.devicePins = {{0, {1, 5}}};
  CHECK(errorOf(r) == std::pair<std::string, std::string>{
                          "pin(stage = 0, devices = ...)",
                          "pin(stage = 0, devices = [1, 5]) puts stage 0 on device 5, which "
                          "exclude(nodes = [1]) leaves out"});
  r.exclusions = {{false, {7}}};
  CHECK(errorOf(r).second ==
        "pin(stage = 0, devices = [1, 5]) puts stage 0 on device 5, which stays idle: "
        "exclude(devices = [7]) takes part of node 1 out, and the planner uses only nodes no "
        "exclusion touches");
  // Pins that conflict on the smaller cluster are named with the ids as written.
  c.nodes = 3;
  r.exclusions = {{true, {0}}};
  r.stages = 2;
  r.devicePins = {{0, {4}}, {1, {5}}};
  auto [hint, message] = errorOf(r);
  CHECK(hint == "pin(stage = 0, devices = ...)");
  CHECK(message.find("pin of stage 0 on devices [4]; pin of stage 1 on devices [5]") !=
        std::string::npos);
}

TEST_CASE("the free search is never slower than a hand plan in its space", "[planner]") {
  const ir::Cluster c = cluster();
  ir::Plan best = passes::planTraining(smallGpt(), c, request());
  for (int stages : {1, 2, 4})
    for (int tp : {1, 2, 4}) {
      PlanRequest hand = request();
      hand.stages = stages;
      hand.maxTensorParallel = tp;
      hand.dataParallel = int(c.deviceCount()) / stages / tp;
      hand.schedule = ir::ScheduleKind::kOneFOneB;
      try {
        ir::Plan p = passes::planTraining(smallGpt(), c, hand);
        INFO("stages " << stages << " tp " << tp);
        CHECK(best.stepTime <= p.stepTime * (1 + 1e-12));
      } catch (const passes::PlanningError&) {
        // Not every grid point fits; the free search needs none of them.
      }
    }
}

TEST_CASE("identical blocks are one layer kind, priced once", "[planner]") {
  // Layers: block0 with the embedding, block1..3, the head with the final norm.
  for (const char* model : {"gpt(layers = 4, hidden = 256, heads = 4, seq = 64, vocab = 512)"}) {
    ir::Graph g = traced(model);
    auto layers = passes::scopeLayers(g, 1);
    REQUIRE(layers);
    REQUIRE(layers->layers.size() == 5);
    std::vector<std::string> signatures;
    for (int l = 0; l < int(layers->layers.size()); ++l)
      signatures.push_back(
          passes::graphSignature(passes::layerSubgraph(g, layers->layerOfOp, l, l + 1).graph));
    INFO(model);
    for (std::size_t l = 2; l + 1 < signatures.size(); ++l) {
      INFO("layer " << l << "\n" << signatures[l] << "\nvs layer 1\n" << signatures[1]);
      CHECK(signatures[l] == signatures[1]);
    }
  }
}

TEST_CASE("past Alpa's scale the DP still runs and is never slower than the grid", "[planner]") {
  // 32 nodes x 4 = 128 devices: whole-node submeshes only, Alpa's DP with a
  // t_max gap next to the uniform search.
  ir::Cluster c = cluster();
  c.nodes = 32;
  ir::Plan best = passes::planTraining(smallGpt(), c, request(256));
  checkValid(best, c, layerCount(best));
  CHECK(best == passes::planTraining(smallGpt(), c, request(256)));
  int tried = 0;
  for (int stages : {1, 2, 4}) {
    PlanRequest grid = request(256);
    grid.stages = stages;
    try {
      ir::Plan p = passes::planTraining(smallGpt(), c, grid);
      INFO("stages " << stages);
      CHECK(best.stepTime <= p.stepTime * (1 + 1e-12));
      ++tried;
    } catch (const passes::PlanningError&) {
    }
  }
  CHECK(tried >= 2);
}
