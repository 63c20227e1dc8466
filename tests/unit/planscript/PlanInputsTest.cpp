// What plan(...) hands the planner (interp/PlanInputs.h): clusters as
// ir::Cluster, schedule blocks as PlanRequest, and where a hint was written.
#include <catch2/catch.hpp>

#include "interp/Handles.h"
#include "interp/PlanInputs.h"
#include "meshflow/meshflow.h"

using namespace meshflow;

namespace {

// Runs `source` and returns the global `name`.
Value globalOf(Interpreter& interpreter, const std::string& source, const std::string& name) {
  Status status = interpreter.eval(source, "t.mesh");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
  auto value = interpreter.global(name);
  REQUIRE(value);
  return *value;
}

template <typename Handle>
const Handle& handle(const Value& value) {
  const auto* object = dynamic_cast<const Handle*>(value.object().get());
  REQUIRE(object);
  return *object;
}

passes::PlanRequest requestOf(const std::string& source) {
  Interpreter interpreter;
  Value schedule = globalOf(interpreter, source, "s");
  passes::PlanRequest request;
  interp::applySchedule(handle<interp::ScheduleObject>(schedule), request);
  return request;
}

}  // namespace

TEST_CASE("a stdlib cluster's inter-node link becomes the node's", "[planscript]") {
  Interpreter interpreter;
  Value value = globalOf(interpreter, "import std.clusters\nlet c = dgx_a100(nodes = 2)", "c");
  ir::Cluster cluster = interp::clusterOf(handle<interp::ClusterObject>(value));
  CHECK(cluster.nodes == 2);
  CHECK(cluster.devicesPerNode == 8);
  CHECK(cluster.deviceCount() == 16);
  CHECK(cluster.device.name == "A100-SXM4-80GB");
  CHECK(cluster.device.memoryBytes == 80e9);
  CHECK(cluster.device.peakFlops == 312e12);
  CHECK(cluster.device.memoryBandwidth == 2039e9);
  CHECK(cluster.intraNode.bandwidth == 300e9);
  CHECK(cluster.intraNode.latency == Approx(2e-6));
  // 25 GB/s per GPU, 8 GPUs: 200 GB/s leave each node.
  CHECK(cluster.interNode.bandwidth == 200e9);
  CHECK(cluster.interNode.latency == Approx(10e-6));
}

TEST_CASE("p3.16xlarge gets ir::p3_16xlarge's 25 Gb/s per node", "[planscript]") {
  Interpreter interpreter;
  Value value = globalOf(interpreter, "import std.clusters\nlet c = p3_16xlarge(nodes = 4)", "c");
  ir::Cluster cluster = interp::clusterOf(handle<interp::ClusterObject>(value));
  CHECK(cluster.interNode.bandwidth == Approx(ir::p3_16xlarge(4).interNode.bandwidth));
  CHECK(cluster.device.memoryBytes == ir::p3_16xlarge(4).device.memoryBytes);
}

TEST_CASE("cpu(devices, mesh) is a cluster of mesh[0] nodes", "[planscript]") {
  Interpreter interpreter;
  Value value = globalOf(interpreter, "let c = cpu(devices = 8, mesh = [2, 4])", "c");
  ir::Cluster cluster = interp::clusterOf(handle<interp::ClusterObject>(value));
  CHECK(cluster.nodes == 2);
  CHECK(cluster.devicesPerNode == 4);
  CHECK(cluster.device.name == "cpu-thread");
  CHECK(cluster.intraNode.bandwidth == 10e9);
  CHECK(cluster.interNode.bandwidth == 40e9);
}

TEST_CASE("every schedule hint reaches the request", "[planscript]") {
  passes::PlanRequest r = requestOf(R"(schedule s {
  microbatches = 32
  pipeline = "interleaved"
  virtual_stages = 2
  stages = 4
  max_tensor_parallel = 8
  data_parallel = 2
  memory_per_device <= 70GB
  recompute = "selective"
  optimizer = adam(lr = 3e-4)
  pin(layers = 0..4, stage = 0)
  pin(op = "block*.mlp.fc1", sharding = "RS1")
  pin(stage = 1, devices = [4, 5])
  pin(layers = 4..6, stage = 2, devices = 8..12)
})");
  CHECK(r.microbatches == 32);
  CHECK(r.schedule == ir::ScheduleKind::kInterleaved);
  CHECK(r.virtualStages == 2);
  CHECK(r.stages == 4);
  CHECK(r.maxTensorParallel == 8);
  CHECK(r.dataParallel == 2);
  CHECK(r.memoryPerDevice == 70e9);
  CHECK(r.recompute == "selective");
  CHECK(r.optimizerCopies == 2);
  REQUIRE(r.layerPins.size() == 2);
  CHECK(r.layerPins[0].firstLayer == 0);
  CHECK(r.layerPins[0].endLayer == 4);
  CHECK(r.layerPins[0].stage == 0);
  CHECK(r.layerPins[1].firstLayer == 4);
  CHECK(r.layerPins[1].stage == 2);
  REQUIRE(r.opPins.size() == 1);
  CHECK(r.opPins[0].pattern == "block*.mlp.fc1");
  CHECK(r.opPins[0].spec == "RS1");
  REQUIRE(r.devicePins.size() == 2);
  CHECK(r.devicePins[0].stage == 1);
  CHECK(r.devicePins[0].devices == std::vector<int>{4, 5});
  CHECK(r.devicePins[1].stage == 2);
  CHECK(r.devicePins[1].devices == std::vector<int>{8, 9, 10, 11});
}

TEST_CASE("auto and absent hints leave the planner's choice", "[planscript]") {
  passes::PlanRequest r = requestOf("schedule s {\n  microbatches = auto\n  stages = auto\n}");
  CHECK_FALSE(r.microbatches);
  CHECK_FALSE(r.stages);
  CHECK_FALSE(r.schedule);
  CHECK_FALSE(r.memoryPerDevice);
  CHECK_FALSE(r.recompute);
  CHECK(r.optimizerCopies == 2);
  CHECK(r.layerPins.empty());
}

TEST_CASE("the optimizer decides the optimizer state per parameter", "[planscript]") {
  CHECK(requestOf("schedule s { optimizer = adamw() }").optimizerCopies == 2);
  CHECK(requestOf("schedule s { optimizer = sgd(momentum = 0.9) }").optimizerCopies == 1);
  CHECK(requestOf("schedule s { optimizer = sgd(lr = 0.1) }").optimizerCopies == 0);
}

TEST_CASE("a planning error's hint is found where the block wrote it", "[planscript]") {
  Interpreter interpreter;
  Value value = globalOf(interpreter, R"(schedule s {
  microbatches = 8
  memory_per_device <= 1MB
  pin(layers = 0..2, stage = 1)
  pin(op = "block*.fc1", sharding = "S0R")
  pin(stage = 0, devices = [0, 1])
})",
                         "s");
  const auto& schedule = handle<interp::ScheduleObject>(value);
  CHECK(interp::hintSpan(schedule, "microbatches").line == 1);
  auto bound = interp::hintSpan(schedule, "memory_per_device");
  CHECK(bound.line == 2);
  CHECK(bound.column == 2);
  CHECK(interp::pinText(schedule, 0) == "pin(layers = 0..2, stage = 1)");
  CHECK(interp::pinText(schedule, 1) == "pin(op = \"block*.fc1\", sharding = \"S0R\")");
  CHECK(interp::hintSpan(schedule, "pin(layers = 0..2, stage = 1)").line == 3);
  CHECK(interp::hintSpan(schedule, "pin(layers=0..2,stage=1)").line == 3);
  CHECK(interp::hintSpan(schedule, "pin(op = 'block*.fc1', sharding = 'S0R')").line == 4);
  CHECK(interp::hintSpan(schedule, "pin(stage = 0, devices = ...)").line == 5);
  CHECK_FALSE(interp::hintSpan(schedule, "pin(stage = 1, devices = ...)").valid());
  CHECK_FALSE(interp::hintSpan(schedule, "stages").valid());
  CHECK_FALSE(interp::hintSpan(schedule, "pin(layers = 0..3, stage = 1)").valid());
}

TEST_CASE("exclude(...) becomes a device exclusion the planner names as written", "[planscript]") {
  Interpreter interpreter;
  Value value = globalOf(interpreter, R"(schedule s {
  exclude(devices = [6, 7])
  exclude(nodes = 2..4)
})",
                         "s");
  const auto& schedule = handle<interp::ScheduleObject>(value);
  passes::PlanRequest r;
  interp::applySchedule(schedule, r);
  REQUIRE(r.exclusions.size() == 2);
  CHECK_FALSE(r.exclusions[0].nodes);
  CHECK(r.exclusions[0].ids == std::vector<int>{6, 7});
  CHECK(r.exclusions[1].nodes);
  CHECK(r.exclusions[1].ids == std::vector<int>{2, 3});
  CHECK(interp::hintSpan(schedule, "exclude(devices = [6, 7])").line == 1);
  CHECK(interp::hintSpan(schedule, "exclude(nodes = [2, 3])").line == 2);
  CHECK_FALSE(interp::hintSpan(schedule, "exclude(nodes = [2])").valid());
}
