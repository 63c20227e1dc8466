// The job a controller sends its workers: everything decodes to what was
// encoded, and bytes that are no job are a JobFormatError, never a crash.
#include "../parallel/ParallelModels.h"
#include "ir/GraphText.h"
#include "runtime/distributed/Messages.h"
#include "runtime/distributed/TrainingJob.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

TEST_CASE("a training job decodes to what was encoded", "[distributed]") {
  // Dropout: attributes of every kind (p, seed) travel too.
  const ir::Graph forward = traceModel(R"(
model drop() {
  let x = input("x", f32[batch, 6])
  let labels = input("labels", i32[batch])
  let h = dropout(gelu(linear(x, 8, name = "in")), 0.25)
  return cross_entropy(linear(h, 3, name = "out"), labels)
})", "drop()");
  runtime::TrainingJob job;
  job.training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  job.plan.virtualStages = 2;
  job.plan.stageOfForwardOp = evenStages(forward, 2);
  job.plan.rankDevices = {{0, 1}, {2, 3}};
  job.plan.rankMeshes = {{1, 2}, {1, 2}};
  std::mt19937 rng(3);
  job.plan.strategies = randomStrategies(forward, 2, {1, 2}, rng);
  REQUIRE(!job.plan.strategies.empty());
  job.plan.schedule = "zb-h1";
  job.plan.microbatches = 3;
  job.plan.recompute = {passes::Recompute::kSelective};
  job.plan.shardOptimizer = {false, true};
  job.plan.costs.resize(2);
  job.plan.costs[1].forwardSeconds = 0.25;
  job.plan.costs[1].recomputeBytes = 12345;
  job.options.batch = 12;
  job.options.timeout = std::chrono::milliseconds(4321);
  job.options.fault = runtime::InjectedFault{2, 3, 4};
  job.data = {"text", 0, "corpus.txt", "/data/corpus.txt"};
  job.onGpus = true;

  const runtime::TrainingJob back = runtime::decodeJob(runtime::encodeJob(job));
  CHECK(ir::printGraph(back.training.graph) == ir::printGraph(job.training.graph));
  CHECK(back.training.graph.outputs == job.training.graph.outputs);
  CHECK(back.training.writeBacks == job.training.writeBacks);
  for (std::size_t o = 0; o < job.training.graph.ops().size(); ++o) {
    const ir::Op &a = back.training.graph.ops()[o], &b = job.training.graph.ops()[o];
    CHECK(a.attrs == b.attrs);
    CHECK(a.forwardOp == b.forwardOp);
    CHECK(a.phase == b.phase);
  }
  CHECK(back.plan.stageOfForwardOp == job.plan.stageOfForwardOp);
  CHECK(back.plan.rankDevices == job.plan.rankDevices);
  CHECK(back.plan.rankMeshes == job.plan.rankMeshes);
  REQUIRE(back.plan.strategies.size() == job.plan.strategies.size());
  for (const auto& [op, specs] : job.plan.strategies) {
    CHECK(back.plan.strategies.at(op).inputs == specs.inputs);
    CHECK(back.plan.strategies.at(op).outputs == specs.outputs);
  }
  CHECK(back.plan.schedule == "zb-h1");
  CHECK(back.plan.microbatches == 3);
  CHECK(back.plan.recompute == job.plan.recompute);
  CHECK(back.plan.shardOptimizer == job.plan.shardOptimizer);
  CHECK(back.plan.costs[1].forwardSeconds == 0.25);
  CHECK(back.plan.costs[1].recomputeBytes == 12345);
  CHECK(back.options.batch == 12);
  CHECK(back.options.timeout == std::chrono::milliseconds(4321));
  REQUIRE(back.options.fault);
  CHECK(back.options.fault->instruction == 4);
  CHECK(back.data.file == "/data/corpus.txt");
  CHECK(back.onGpus);
}

TEST_CASE("tensors travel bit for bit", "[distributed]") {
  runtime::TensorMap tensors;
  tensors.emplace("w", runtime::Tensor::fromF32({2, 3}, {1.5f, -0.0f, 3e-38f, 7, 8, 9}));
  tensors.emplace("ids", runtime::Tensor::fromI32({4}, {1, -2, 3, 2147483647}));
  tensors.emplace("half", runtime::Tensor::fromF32({3}, {0.1f, 65504, -1}).castTo(ir::DType::BF16));
  tensors.emplace("scalar", runtime::Tensor::scalar(0.5f));
  const runtime::TensorMap back = runtime::decodeTensors(runtime::encodeTensors(tensors));
  REQUIRE(back.size() == tensors.size());
  for (const auto& [name, t] : tensors) CHECK(back.at(name).bitEqual(t));
}

TEST_CASE("bytes that are no job or message are refused with JobFormatError", "[distributed]") {
  std::mt19937 rng(11);
  const std::string job = [] {
    runtime::TrainingJob j;
    j.training = passes::buildTrainingGraph(traceModel("", "gpt(layers = 1, hidden = 8, heads = 2, seq = 2, vocab = 8)"),
                                            passes::OptimizerConfig::adam());
    j.plan.stageOfForwardOp.assign(j.training.graph.ops().size(), 0);
    return runtime::encodeJob(j);
  }();
  CHECK_THROWS_AS(runtime::decodeJob("not a job"), runtime::JobFormatError);
  CHECK_THROWS_AS(runtime::decodeTensors(std::string(5, '\xff')), runtime::JobFormatError);
  CHECK_THROWS_AS(runtime::distributed::decode("\x92\x01\x02"), runtime::JobFormatError);
  // Truncations and flipped bytes of a real job: refused or decoded, never a crash.
  for (int i = 0; i < 200; ++i) {
    std::string bytes = job;
    if (i % 2) bytes.resize(rng() % bytes.size());
    else bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    try {
      (void)runtime::decodeJob(bytes);
    } catch (const runtime::JobFormatError&) {
    }
  }
}
