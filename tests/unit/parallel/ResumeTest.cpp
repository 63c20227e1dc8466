// Checkpoint and resume on the parallel runtime: a run stopped after a checkpoint
// and resumed (with the same plan, or another one) continues the uninterrupted run.
#include <filesystem>

#include "ParallelModels.h"
#include "runtime/checkpoint/Checkpoint.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

const char* kModel = R"(
model small(width = 8) {
  let x = input("x", f32[batch, 5])
  let labels = input("labels", i32[batch])
  var h = relu(linear(x, width, name = "fc1"))
  h = h + gelu(linear(h, width, name = "fc2"))
  return cross_entropy(linear(h, 4, name = "out"), labels)
}
)";

runtime::ParallelPlan twoByTwo(const ir::Graph& forward) {
  runtime::ParallelPlan plan;
  plan.virtualStages = 2;
  plan.stageOfForwardOp = evenStages(forward, 2);
  plan.rankDevices = {{0, 2}, {1, 3}};
  plan.microbatches = 2;
  return plan;
}

// 2 stages on (1, 2) tensor-parallel meshes, with strategies that split at
// least one parameter (the first such draw of a fixed generator).
runtime::ParallelPlan tensorParallel(const ir::Graph& forward) {
  runtime::ParallelPlan plan = twoByTwo(forward);
  plan.rankDevices = {{0, 1}, {2, 3}};
  plan.rankMeshes = {{1, 2}, {1, 2}};
  std::mt19937 rng(7);
  for (bool split = false; !split;) {
    plan.strategies = randomStrategies(forward, 4, {1, 2}, rng);
    for (const auto& [op, specs] : plan.strategies)
      split = split || (forward.op(op).kind == ir::OpKind::Parameter && !specs.outputs.at(0).isReplicated());
  }
  return plan;
}

struct TempDir {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               fmt::format("meshflow-resume-{}", std::random_device{}());
  ~TempDir() { std::filesystem::remove_all(path); }
};

// Steps [first, last] of `plan` from `state`; returns the losses and leaves the state.
std::vector<double> steps(const passes::TrainingGraph& training, const runtime::ParallelPlan& plan,
                          runtime::TensorMap& state, int first, int last, const std::filesystem::path* dir) {
  runtime::ParallelTrainer trainer(training, plan, optionsFor(8));
  trainer.setState(state);
  auto data = runtime::syntheticData(3);
  std::vector<double> losses;
  for (int step = first; step <= last; ++step) {
    losses.push_back(trainer.step(data->batch(training.graph, 8, step - 1), step).loss);
    if (dir) runtime::writeCheckpoint(*dir, step, {{"model", "small"}}, trainer.shards());
  }
  state = trainer.state();
  return losses;
}

// A run of `total` steps on `twoByTwo`, against one that checkpoints after
// `stopAt` steps and resumes from the checkpoint on `resumeOn`.
struct Comparison {
  std::vector<double> straightLosses, resumedLosses;
  runtime::TensorMap straight, resumed;
};

Comparison stopAndResume(const ir::Graph& forward, std::uint64_t seed, int stopAt, int total,
                         const runtime::ParallelPlan& resumeOn, const runtime::ParallelPlan* runOn = nullptr) {
  const runtime::ParallelPlan run = runOn ? *runOn : twoByTwo(forward);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::TensorMap initial;
  runtime::initializeParameters(training.graph, seed, initial);
  Comparison c;
  c.straight = initial;
  c.straightLosses = steps(training, run, c.straight, 1, total, nullptr);

  TempDir dir;
  runtime::TensorMap first = initial;
  steps(training, run, first, 1, stopAt, &dir.path);
  auto loaded = runtime::readLatestCheckpoint(dir.path);
  REQUIRE(loaded);
  REQUIRE(loaded->step == stopAt);
  c.resumed = loaded->tensors;
  c.resumedLosses = steps(training, resumeOn, c.resumed, stopAt + 1, total, nullptr);
  REQUIRE(c.resumedLosses.size() == static_cast<std::size_t>(total - stopAt));
  return c;
}

}  // namespace

TEST_CASE("resuming from a checkpoint is bit-identical to running on", "[parallel][checkpoint]") {
  ir::Graph forward = traceModel(kModel, "small()");
  Comparison c = stopAndResume(forward, 5, 3, 5, twoByTwo(forward));
  CHECK(c.resumedLosses[0] == c.straightLosses[3]);
  CHECK(c.resumedLosses[1] == c.straightLosses[4]);
  for (const auto& [name, tensor] : c.straight) {
    INFO(name);
    CHECK(c.resumed.at(name).bitEqual(tensor));
  }
}

TEST_CASE("a checkpoint resumes on another plan and device count", "[parallel][checkpoint]") {
  ir::Graph forward = traceModel(kModel, "small()");
  runtime::ParallelPlan three;  // 3 stages, one replica, gpipe
  three.virtualStages = 3;
  three.stageOfForwardOp = evenStages(forward, 3);
  three.rankDevices = {{0}, {1}, {2}};
  three.schedule = "gpipe";
  three.microbatches = 4;
  Comparison c = stopAndResume(forward, 6, 2, 4, three);
  CHECK(c.resumedLosses[0] == Approx(c.straightLosses[2]).epsilon(1e-4));
  CHECK(c.resumedLosses[1] == Approx(c.straightLosses[3]).epsilon(1e-4));
  for (const auto& [name, tensor] : c.straight) {
    INFO(name);
    CHECK(runtime::allClose(c.resumed.at(name), tensor, 1e-3, 1e-4));
  }
}

TEST_CASE("tensor-parallel devices hold boxes of the state, checkpoint them and resume", "[parallel][checkpoint]") {
  ir::Graph forward = traceModel(kModel, "small()");
  runtime::ParallelPlan plan = tensorParallel(forward);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::TensorMap initial;
  runtime::initializeParameters(training.graph, 4, initial);
  runtime::ParallelTrainer trainer(training, plan, optionsFor(8));
  trainer.setState(initial);
  std::int64_t held = 0, whole = 0;
  for (const runtime::DeviceShard& shard : trainer.shards())
    for (const runtime::ShardPiece& piece : shard.pieces) {
      held += piece.tensor.elements();
      whole += runtime::shapeElements(piece.globalShape);
    }
  CHECK(held < whole);  // some parameter (and its Adam state) is split between the members

  Comparison same = stopAndResume(forward, 4, 2, 4, plan, &plan);
  CHECK(same.resumedLosses[0] == same.straightLosses[2]);
  CHECK(same.resumedLosses[1] == same.straightLosses[3]);
  for (const auto& [name, tensor] : same.straight) {
    INFO(name);
    CHECK(same.resumed.at(name).bitEqual(tensor));
  }
  Comparison other = stopAndResume(forward, 4, 2, 4, twoByTwo(forward), &plan);
  CHECK(other.resumedLosses[0] == Approx(other.straightLosses[2]).epsilon(1e-4));
  for (const auto& [name, tensor] : other.straight) {
    INFO(name);
    CHECK(runtime::allClose(other.resumed.at(name), tensor, 1e-3, 1e-4));
  }
}

namespace {

// twoByTwo with each rank's optimizer state sharded over its 2 replicas.
runtime::ParallelPlan shardedTwoByTwo(const ir::Graph& forward) {
  runtime::ParallelPlan plan = twoByTwo(forward);
  plan.shardOptimizer = {true, true};
  return plan;
}

// One stage over 4 replicas, sharded: another replica count.
runtime::ParallelPlan shardedFourReplicas(const ir::Graph& forward) {
  runtime::ParallelPlan plan;
  plan.virtualStages = 1;
  plan.stageOfForwardOp = evenStages(forward, 1);
  plan.rankDevices = {{0, 1, 2, 3}};
  plan.microbatches = 2;
  plan.shardOptimizer = {true};
  return plan;
}

}  // namespace

TEST_CASE("a sharded optimizer checkpoints each replica's shard and resumes on any plan",
          "[parallel][checkpoint][zero]") {
  ir::Graph forward = traceModel(kModel, "small()");
  const runtime::ParallelPlan sharded = shardedTwoByTwo(forward);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::TensorMap initial;
  runtime::initializeParameters(training.graph, 8, initial);
  runtime::ParallelTrainer trainer(training, sharded, optionsFor(8));
  trainer.setState(initial);
  // Every device holds half of each optimizer-state tensor, as a flat piece;
  // the parameters whole. state() joins the halves.
  std::int64_t flat = 0, flatWhole = 0;
  for (const runtime::DeviceShard& shard : trainer.shards())
    for (const runtime::ShardPiece& piece : shard.pieces) {
      const bool moment = piece.name.find(".adam_") != std::string::npos;
      CHECK(piece.flat.has_value() == moment);
      if (!moment) continue;
      flat += piece.tensor.elements();
      flatWhole += runtime::shapeElements(piece.globalShape);
    }
  CHECK(flatWhole > 0);
  CHECK(flat == flatWhole / 2);
  const runtime::TensorMap assembled = trainer.state();
  for (const auto& [name, tensor] : initial) {
    INFO(name);
    CHECK(assembled.at(name).bitEqual(tensor));
  }

  Comparison same = stopAndResume(forward, 8, 2, 4, sharded, &sharded);
  CHECK(same.resumedLosses[0] == same.straightLosses[2]);
  CHECK(same.resumedLosses[1] == same.straightLosses[3]);
  for (const auto& [name, tensor] : same.straight) {
    INFO(name);
    CHECK(same.resumed.at(name).bitEqual(tensor));
  }
  // Onto 4 replicas (sharded 4 ways) and onto the unsharded plan.
  for (const runtime::ParallelPlan& other : {shardedFourReplicas(forward), twoByTwo(forward)}) {
    Comparison c = stopAndResume(forward, 8, 2, 4, other, &sharded);
    CHECK(c.resumedLosses[0] == Approx(c.straightLosses[2]).epsilon(1e-4));
    CHECK(c.resumedLosses[1] == Approx(c.straightLosses[3]).epsilon(1e-4));
    for (const auto& [name, tensor] : c.straight) {
      INFO(name);
      CHECK(runtime::allClose(c.resumed.at(name), tensor, 1e-3, 1e-4));
    }
  }
  // And an unsharded checkpoint resumes sharded.
  Comparison back = stopAndResume(forward, 8, 2, 4, sharded);
  CHECK(back.resumedLosses[0] == back.straightLosses[2]);
  for (const auto& [name, tensor] : back.straight) {
    INFO(name);
    CHECK(back.resumed.at(name).bitEqual(tensor));
  }
}

TEST_CASE("sharded optimizer state on tensor-parallel meshes checkpoints and resumes", "[parallel][checkpoint][zero]") {
  // 2 replicas of (1, 2) tensor-parallel meshes: each member's boxes of the
  // state are flat-sharded over its replica group.
  ir::Graph forward = traceModel(kModel, "small()");
  runtime::ParallelPlan plan = tensorParallel(forward);
  plan.virtualStages = 1;
  plan.stageOfForwardOp = evenStages(forward, 1);
  plan.rankDevices = {{0, 1, 2, 3}};
  plan.rankMeshes = {{1, 2}};
  plan.shardOptimizer = {true};
  Comparison same = stopAndResume(forward, 9, 2, 4, plan, &plan);
  CHECK(same.resumedLosses[0] == same.straightLosses[2]);
  CHECK(same.resumedLosses[1] == same.straightLosses[3]);
  for (const auto& [name, tensor] : same.straight) {
    INFO(name);
    CHECK(same.resumed.at(name).bitEqual(tensor));
  }
  Comparison other = stopAndResume(forward, 9, 2, 4, twoByTwo(forward), &plan);
  CHECK(other.resumedLosses[0] == Approx(other.straightLosses[2]).epsilon(1e-4));
  for (const auto& [name, tensor] : other.straight) {
    INFO(name);
    CHECK(runtime::allClose(other.resumed.at(name), tensor, 1e-3, 1e-4));
  }
}
