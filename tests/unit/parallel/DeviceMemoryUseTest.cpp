// What the parallel runtime's devices hold (runtime/memory/DeviceMemory.h):
// measured by category, freed at last use, lowered by recomputation, and
// limited with an error that names the device, the instruction and the bytes.
#include "ParallelModels.h"
#include "passes/Planner.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

runtime::ParallelPlan oneDevice(const ir::Graph& forward) {
  runtime::ParallelPlan plan;
  plan.virtualStages = 1;
  plan.stageOfForwardOp = evenStages(forward, 1);
  plan.rankDevices = {{0}};
  plan.microbatches = 1;
  return plan;
}

runtime::ParallelStepResult oneStep(const passes::TrainingGraph& training,
                                    const runtime::ParallelPlan& plan,
                                    runtime::ParallelOptions options) {
  runtime::ParallelTrainer trainer(training, plan, options);
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(1);
  return trainer.step(data->batch(training.graph, options.batch, 0), 1);
}

std::int64_t bytesOf(const runtime::TensorMap& state, const std::string& suffix, bool with) {
  std::int64_t total = 0;
  for (const auto& [name, t] : state) {
    const bool has = name.size() > suffix.size() &&
                     name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (has == with) total += static_cast<std::int64_t>(t.bytes());
  }
  return total;
}

std::int64_t category(const runtime::MemoryStats& s, runtime::MemoryCategory c) {
  return s.peakBreakdown[static_cast<std::size_t>(c)];
}

const char* kGpt = "gpt(layers = 2, hidden = 32, heads = 2, seq = 16, vocab = 24)";

}  // namespace

TEST_CASE("a device's peak holds its parameters, optimizer state and gradients exactly",
          "[parallel][memory]") {
  ir::Graph forward = traceModel("", kGpt);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  auto result = oneStep(training, oneDevice(forward), optionsFor(4));
  REQUIRE(result.memory.size() == 1);
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  const std::int64_t parameters =
      bytesOf(state, ".adam_m", false) - bytesOf(state, ".adam_v", true);
  const runtime::MemoryStats& s = result.memory[0];
  CHECK(category(s, runtime::MemoryCategory::kParameters) == parameters);
  CHECK(category(s, runtime::MemoryCategory::kOptimizerState) == 2 * parameters);
  CHECK(s.peak > 3 * parameters);
  CHECK(s.peak == [&] {
    std::int64_t sum = 0;
    for (auto b : s.peakBreakdown) sum += b;
    return sum;
  }());
  CHECK(s.reused > 0);  // a step reuses the blocks of values freed before it
}

TEST_CASE("full recomputation lowers the activations a pipeline holds",
          "[parallel][memory][recompute]") {
  ir::Graph forward = traceModel("", kGpt);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan;
  plan.virtualStages = 2;
  plan.stageOfForwardOp = evenStages(forward, 2);
  plan.rankDevices = {{0}, {1}};
  plan.schedule = "gpipe";
  plan.microbatches = 4;
  auto kept = oneStep(training, plan, optionsFor(8));
  plan.recompute = {passes::Recompute::kFull, passes::Recompute::kFull};
  auto recomputed = oneStep(training, plan, optionsFor(8));
  for (std::size_t d = 0; d < 2; ++d) {
    INFO("device " << d);
    const auto before = category(kept.memory[d], runtime::MemoryCategory::kActivations);
    const auto after = category(recomputed.memory[d], runtime::MemoryCategory::kActivations);
    CHECK(after < before * 3 / 4);
  }
}

TEST_CASE("recomputing one layer at a time holds one layer's activations, not the stage's",
          "[parallel][memory][recompute]") {
  // One stage of four transformer blocks: checkpointing at every layer keeps
  // the layers' inputs and rebuilds one layer before its backward, so the
  // backward's peak falls well below rebuilding the whole stage at once.
  ir::Graph forward = traceModel("", "gpt(layers = 4, hidden = 32, heads = 2, seq = 32, vocab = 24)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = oneDevice(forward);
  auto activations = [&](const runtime::ParallelPlan& p) {
    return category(oneStep(training, p, optionsFor(4)).memory[0], runtime::MemoryCategory::kActivations);
  };
  const auto kept = activations(plan);
  plan.recompute = {passes::Recompute::kFull};
  const auto wholeStage = activations(plan);
  plan.layerOfForwardOp = passes::planLayers(forward, 0).layerOfOp;
  const auto perLayer = activations(plan);
  INFO("kept " << kept << ", whole stage " << wholeStage << ", per layer " << perLayer);
  CHECK(perLayer < wholeStage * 2 / 3);
  CHECK(perLayer < kept / 2);
  plan.recompute = {passes::Recompute::kSelective};
  const auto selective = activations(plan);
  CHECK(selective < kept);
  CHECK(selective > perLayer);
}

TEST_CASE(
    "a device past its memory stops the step naming the device, the instruction and the bytes",
    "[parallel][memory]") {
  ir::Graph forward = traceModel("", kGpt);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelOptions options = optionsFor(4);
  auto fits = oneStep(training, oneDevice(forward), options);
  options.deviceMemory = fits.memory[0].peak * 9 / 10;
  try {
    oneStep(training, oneDevice(forward), options);
    FAIL("the step ran past the device's memory");
  } catch (const runtime::ParallelRunError& e) {
    const std::string message = e.what();
    INFO(message);
    CHECK(message.rfind("device 0, step 1, instruction ", 0) == 0);
    CHECK(message.find("out of memory on device 0: ") != std::string::npos);
    CHECK(message.find(runtime::bytesText(double(options.deviceMemory))) != std::string::npos);
    CHECK(message.find("holding parameters ") != std::string::npos);
  }
}

TEST_CASE("a sharded optimizer holds 1 / replicas of the optimizer state on each device",
          "[parallel][memory][zero]") {
  // Three replicas of one stage: unsharded, every device holds Adam's two
  // moments of every parameter; sharded, each holds its flat shard of them —
  // a third, up to the padding of each tensor to a multiple of 3 elements.
  ir::Graph forward = traceModel("", kGpt);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = oneDevice(forward);
  plan.rankDevices = {{0, 1, 2}};
  auto whole = oneStep(training, plan, optionsFor(6));
  plan.shardOptimizer = {true};
  auto sharded = oneStep(training, plan, optionsFor(6));
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  std::int64_t shards = 0;  // bytes of one device's shards of the moments
  for (const auto& [name, t] : state)
    if (name.find(".adam_") != std::string::npos) shards += (t.elements() + 2) / 3 * 4;
  const std::int64_t moments = bytesOf(state, ".adam_m", true) + bytesOf(state, ".adam_v", true);
  for (std::size_t d = 0; d < 3; ++d) {
    INFO("device " << d);
    CHECK(category(whole.memory[d], runtime::MemoryCategory::kOptimizerState) == moments);
    CHECK(category(sharded.memory[d], runtime::MemoryCategory::kOptimizerState) == shards);
    CHECK(shards * 3 < moments + 3 * 2 * 4 * static_cast<std::int64_t>(state.size()));
    CHECK(shards * 3 >= moments);
  }
}
