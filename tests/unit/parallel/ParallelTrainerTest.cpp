// The parallel runtime on hand-picked plans: each equals the serial reference.
#include "ParallelModels.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {


runtime::ParallelPlan pipeline(const ir::Graph& forward, int ranks, int replicas, const std::string& schedule,
                               int microbatches, int chunks = 1) {
  runtime::ParallelPlan plan;
  plan.virtualStages = ranks * chunks;
  plan.stageOfForwardOp = evenStages(forward, plan.virtualStages);
  plan.rankDevices.assign(static_cast<std::size_t>(ranks), {});
  for (int r = 0; r < ranks; ++r)
    for (int i = 0; i < replicas; ++i) plan.rankDevices[static_cast<std::size_t>(r)].push_back(i * ranks + r);
  plan.schedule = schedule;
  plan.microbatches = microbatches;
  return plan;
}

}  // namespace

TEST_CASE("one stage on one device equals the serial reference", "[parallel]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  auto serial = runSerial(training, 8, 3, 1);
  auto parallel = runParallel(training, pipeline(forward, 1, 1, "1f1b", 1), optionsFor(8), 3, 1);
  requireSameRun(parallel, serial);
}

TEST_CASE("pipelines and replicas equal the serial reference", "[parallel]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  auto serial = runSerial(training, 8, 3, 2);
  for (const char* schedule : {"gpipe", "1f1b", "zb-h1"}) {
    for (int ranks : {2, 3}) {
      for (int replicas : {1, 2}) {
        INFO(schedule << " ranks " << ranks << " replicas " << replicas);
        runtime::ParallelOptions options = optionsFor(8);
        options.bucketBytes = 64;  // several buckets per stage
        auto parallel = runParallel(training, pipeline(forward, ranks, replicas, schedule, 4 / replicas), options, 3, 2);
        requireSameRun(parallel, serial);
      }
    }
  }
}

TEST_CASE("a failing device stops every device with an error naming it", "[parallel]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelOptions options = optionsFor(8);
  options.fault = runtime::InjectedFault{1, 2, 3};
  runtime::ParallelTrainer trainer(training, pipeline(forward, 2, 1, "1f1b", 4), options);
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 0, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(0);
  trainer.step(data->batch(training.graph, 8, 0), 1);
  try {
    trainer.step(data->batch(training.graph, 8, 1), 2);
    FAIL("the injected fault did not stop the step");
  } catch (const runtime::ParallelRunError& e) {
    std::string message = e.what();
    INFO(message);
    CHECK(message.find("device 1, step 2, instruction 3") != std::string::npos);
    CHECK(message.find("injected fault") != std::string::npos);
  }
}

TEST_CASE("devices that share fewer host cores compute the same bits", "[parallel][cores]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  auto plan = pipeline(forward, 2, 2, "1f1b", 2);  // 4 devices
  auto own = runParallel(training, plan, optionsFor(8), 3, 4);
  for (int cores : {1, 2, 3}) {
    INFO("cores " << cores);
    runtime::ParallelOptions options = optionsFor(8);
    options.hostCores = cores;
    auto shared = runParallel(training, plan, options, 3, 4);
    CHECK(shared.losses == own.losses);
    for (const auto& [name, tensor] : own.state) CHECK(shared.state.at(name).bitEqual(tensor));
  }
}

TEST_CASE("a measured step has every device's timeline in program order", "[parallel]") {
  ir::Graph forward = traceModel(kMlp3, "mlp3()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelTrainer trainer(training, pipeline(forward, 2, 1, "1f1b", 4), optionsFor(8));
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 0, state);
  trainer.setState(state);
  auto result = trainer.step(runtime::syntheticData(0)->batch(training.graph, 8, 0), 1);
  REQUIRE(result.devices.size() == 2);
  for (std::size_t d = 0; d < 2; ++d) {
    const auto& code = trainer.program().devices[d].code;
    const auto& timeline = result.devices[d].timeline;
    std::size_t frees = 0;
    for (const auto& in : code) frees += in.op == ir::Opcode::kFree ? 1 : 0;
    REQUIRE(timeline.size() == code.size() - frees);
    for (std::size_t i = 0; i < timeline.size(); ++i) {
      CHECK(timeline[i].start <= timeline[i].end);
      CHECK(timeline[i].end <= result.seconds);
      if (i > 0) CHECK(timeline[i].index > timeline[i - 1].index);
      if (i > 0) CHECK(timeline[i].start >= timeline[i - 1].end);
    }
  }
}

TEST_CASE("replicas set from one map update their shared parameters apart", "[parallel][cores]") {
  // setState hands every replica a copy of one tensor per parameter: with the
  // map gone the replicas share the elements, and each one's in-place
  // optimizer update must give itself elements of its own before it reads.
  const char* wide = R"(
model wide_mlp() {
  let x = input("x", f32[batch, 64])
  let y = input("y", f32[batch, 4])
  let h = relu(linear(x, 512, name = "fc1"))
  let out = linear(relu(linear(h, 512, name = "fc2")), 4, name = "fc3")
  return mean((out - y) * (out - y))
}
)";
  ir::Graph forward = traceModel(wide, "wide_mlp()");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  auto plan = pipeline(forward, 1, 2, "1f1b", 1);
  auto expected = runParallel(training, plan, optionsFor(8), 2, 5);
  for (int attempt = 0; attempt < 10; ++attempt) {
    runtime::ParallelTrainer trainer(training, plan, optionsFor(8));
    {
      runtime::TensorMap state;
      runtime::initializeParameters(training.graph, 5, state);
      trainer.setState(state);
    }  // the map is gone: the two replicas share each parameter's elements
    auto data = runtime::syntheticData(5);
    for (int step = 1; step <= 2; ++step) trainer.step(data->batch(training.graph, 8, step - 1), step);
    auto state = trainer.state();
    for (const auto& [name, tensor] : expected.state) {
      INFO("attempt " << attempt << ", " << name);
      REQUIRE(state.at(name).bitEqual(tensor));
    }
  }
}
