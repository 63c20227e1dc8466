// The controller/worker protocol of the process backends (runtime/distributed/):
// a plan run by a controller and workers, each running one device, computes
// bit for bit what the cpu backend's threads compute, state and checkpoints
// included, and a device failing anywhere stops every rank with its error.
#include <filesystem>

#include "../parallel/ParallelModels.h"
#include "ThreadProcessGroup.h"
#include "runtime/GpuHosts.h"
#include "runtime/distributed/ProcessTrainer.h"

using namespace meshflow;
using namespace meshflow::parallel_test;
using namespace meshflow::distributed_test;

namespace {

struct Case {
  std::string name;
  std::string model;
  runtime::ParallelPlan plan;
  std::int64_t batch;
};

runtime::ParallelPlan pipeline(const ir::Graph& forward, int ranks, int chunks, int replicas, std::string schedule,
                               int microbatches) {
  runtime::ParallelPlan plan;
  plan.virtualStages = ranks * chunks;
  plan.stageOfForwardOp = evenStages(forward, plan.virtualStages);
  plan.rankDevices.assign(static_cast<std::size_t>(ranks), {});
  for (int i = 0; i < replicas; ++i)
    for (int r = 0; r < ranks; ++r) plan.rankDevices[static_cast<std::size_t>(r)].push_back(i * ranks + r);
  plan.schedule = std::move(schedule);
  plan.microbatches = microbatches;
  return plan;
}

const char* kMlp = "gpt(layers = 2, hidden = 16, heads = 2, seq = 4, vocab = 24)";

std::vector<Case> cases(const ir::Graph& forward) {
  std::vector<Case> all;
  all.push_back({"1f1b, 2 stages x 2 replicas", kMlp, pipeline(forward, 2, 1, 2, "1f1b", 2), 8});
  all.push_back({"gpipe, 3 stages", kMlp, pipeline(forward, 3, 1, 1, "gpipe", 3), 6});
  all.push_back({"interleaved, 2 ranks x 2 chunks", kMlp, pipeline(forward, 2, 2, 1, "interleaved", 2), 4});
  all.push_back({"zbv, 2 ranks", kMlp, pipeline(forward, 2, 2, 1, "zbv", 4), 4});
  all.push_back({"zb-h1, 2 ranks x 2 replicas", kMlp, pipeline(forward, 2, 1, 2, "zb-h1", 2), 8});
  Case sharded{"sharded optimizer, 1 stage x 4 replicas", kMlp, pipeline(forward, 1, 1, 4, "1f1b", 1), 8};
  sharded.plan.shardOptimizer = {true};
  all.push_back(sharded);
  Case recompute{"full recomputation, 2 stages", kMlp, pipeline(forward, 2, 1, 1, "1f1b", 2), 4};
  recompute.plan.recompute = {passes::Recompute::kFull, passes::Recompute::kSelective};
  all.push_back(recompute);
  Case tensor{"tensor parallel (1, 2) x 2 stages", kMlp, pipeline(forward, 2, 1, 1, "1f1b", 2), 4};
  tensor.plan.rankDevices = {{0, 1}, {2, 3}};
  tensor.plan.rankMeshes = {{1, 2}, {1, 2}};
  std::mt19937 rng(7);
  tensor.plan.strategies = randomStrategies(forward, 2, {1, 2}, rng);
  all.push_back(tensor);
  return all;
}

int devicesOf(const runtime::ParallelPlan& plan) {
  int devices = 0;
  for (const auto& rank : plan.rankDevices)
    for (int d : rank) devices = std::max(devices, d + 1);
  return devices;
}

void requireBitEqual(const runtime::TensorMap& a, const runtime::TensorMap& b) {
  REQUIRE(a.size() == b.size());
  for (const auto& [name, tensor] : b) {
    INFO(name);
    REQUIRE(a.count(name));
    CHECK(a.at(name).bitEqual(tensor));
  }
}

}  // namespace

TEST_CASE("a plan run by a controller and workers equals the cpu backend bit for bit", "[distributed]") {
  const ir::Graph forward = traceModel("", kMlp);
  const passes::TrainingGraph training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  constexpr int kSteps = 3;
  for (const Case& c : cases(forward)) {
    DYNAMIC_SECTION(c.name) {
      runtime::ParallelOptions options = optionsFor(c.batch);
      RunResult threads = runParallel(training, c.plan, options, kSteps, 5);

      ThreadJob job(devicesOf(c.plan));
      RunResult processes;
      auto outcomes = runJob(job, [&](runtime::ProcessGroup& group) {
        runtime::TrainingJob description{training, c.plan, options, runtime::syntheticData(5)->recipe()};
        runtime::ProcessTrainer trainer(group, description);
        // Every process makes its own share of the initial state: together
        // the same values as the whole state the cpu backend starts from.
        trainer.initializeState(5);
        runtime::TensorMap initial;
        runtime::initializeParameters(training.graph, 5, initial);
        requireBitEqual(trainer.state(), initial);
        auto data = runtime::syntheticData(5);
        for (int step = 1; step <= kSteps; ++step)
          processes.losses.push_back(trainer.step(data->batch(training.graph, c.batch, step - 1), step).loss);
        processes.state = trainer.state();
      });
      for (const auto& o : outcomes) CHECK(o.code == 0);
      REQUIRE(processes.losses.size() == threads.losses.size());
      for (std::size_t i = 0; i < threads.losses.size(); ++i) CHECK(processes.losses[i] == threads.losses[i]);
      requireBitEqual(processes.state, threads.state);
    }
  }
}

TEST_CASE("workers make their own share of the initial state instead of receiving it", "[distributed]") {
  const ir::Graph forward = traceModel("", kMlp);
  const passes::TrainingGraph training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  // Tensor-parallel stages: each device holds boxes of the parameters.
  runtime::ParallelPlan plan = pipeline(forward, 2, 1, 1, "1f1b", 2);
  plan.rankDevices = {{0, 1}, {2, 3}};
  plan.rankMeshes = {{1, 2}, {1, 2}};
  std::mt19937 rng(11);
  plan.strategies = randomStrategies(forward, 2, {1, 2}, rng);
  runtime::TensorMap whole;
  runtime::initializeParameters(training.graph, 9, whole);
  // The controller's bytes for starting the job's state either way, and the
  // state after two steps.
  auto run = [&](bool initialize, std::size_t& bytes, RunResult& result) {
    ThreadJob job(4);
    runJob(job, [&](runtime::ProcessGroup& group) {
      runtime::ProcessTrainer trainer(group, {training, plan, optionsFor(4), runtime::syntheticData(9)->recipe()});
      const std::size_t before = job.sentBy(0);
      if (initialize)
        trainer.initializeState(9);
      else
        trainer.setState(whole);
      bytes = job.sentBy(0) - before;
      auto data = runtime::syntheticData(9);
      for (int step = 1; step <= 2; ++step)
        result.losses.push_back(trainer.step(data->batch(training.graph, 4, step - 1), step).loss);
      result.state = trainer.state();
    });
  };
  std::size_t sentBytes = 0, madeBytes = 0;
  RunResult sent, made;
  run(false, sentBytes, sent);
  run(true, madeBytes, made);
  const std::size_t stateBytes = runtime::encodeTensors(whole).size();
  INFO(fmt::format("state {} bytes; the controller sent {} bytes to hand it out, {} to have it made", stateBytes,
                   sentBytes, madeBytes));
  CHECK(sentBytes >= 3 * stateBytes);  // the whole state to each of 3 workers
  CHECK(madeBytes < 3 * 128);          // a seed to each
  CHECK(made.losses == sent.losses);
  requireBitEqual(made.state, sent.state);
}

TEST_CASE("a job whose plan does not match the processes is refused on every rank", "[distributed]") {
  const ir::Graph forward = traceModel("", kMlp);
  const passes::TrainingGraph training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  ThreadJob job(3);
  std::string error;
  auto outcomes = runJob(job, [&](runtime::ProcessGroup& group) {
    runtime::TrainingJob description{training, pipeline(forward, 2, 1, 1, "1f1b", 2), optionsFor(4),
                                     runtime::syntheticData(1)->recipe()};
    try {
      runtime::ProcessTrainer trainer(group, description);
    } catch (const runtime::ParallelRunError& e) {
      error = e.what();
    }
  });
  CHECK(error == "the plan runs on 2 devices, but the thread backend started 3 processes (one per device: launch with -np 2)");
}

TEST_CASE("a device failing in a worker stops every rank with its error", "[distributed]") {
  const ir::Graph forward = traceModel("", kMlp);
  const passes::TrainingGraph training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = pipeline(forward, 3, 1, 1, "1f1b", 3);
  runtime::ParallelOptions options = optionsFor(6);
  options.fault = runtime::InjectedFault{2, 2, 1};
  ThreadJob job(3, std::chrono::seconds(30));
  std::string error;
  auto start = std::chrono::steady_clock::now();
  auto outcomes = runJob(job, [&](runtime::ProcessGroup& group) {
    runtime::ProcessTrainer trainer(group, {training, plan, options, runtime::syntheticData(1)->recipe()});
    runtime::TensorMap state;
    runtime::initializeParameters(training.graph, 1, state);
    trainer.setState(state);
    auto data = runtime::syntheticData(1);
    trainer.step(data->batch(training.graph, 6, 0), 1);
    try {
      trainer.step(data->batch(training.graph, 6, 1), 2);
    } catch (const runtime::ParallelRunError& e) {
      error = e.what();
    }
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO(error);
  CHECK(error.find("device 2") != std::string::npos);
  CHECK(error.find("step 2") != std::string::npos);
  CHECK(error.find("injected") != std::string::npos);
  CHECK(seconds < 20);  // the others stopped at once, not at their 30 s timeout
}

TEST_CASE("every rank writes its shards and the controller commits the checkpoint", "[distributed][checkpoint]") {
  const ir::Graph forward = traceModel("", kMlp);
  const passes::TrainingGraph training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelPlan plan = pipeline(forward, 2, 1, 2, "1f1b", 2);
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("meshflow-distributed-{}", ::getpid());
  std::filesystem::remove_all(dir);
  runtime::TensorMap saved;
  ThreadJob job(4);
  runJob(job, [&](runtime::ProcessGroup& group) {
    runtime::ProcessTrainer trainer(group, {training, plan, optionsFor(8), runtime::syntheticData(3)->recipe()});
    runtime::TensorMap state;
    runtime::initializeParameters(training.graph, 3, state);
    trainer.setState(state);
    trainer.step(runtime::syntheticData(3)->batch(training.graph, 8, 0), 1);
    trainer.saveCheckpoint(dir, 1, {{"model", "gpt"}});
    saved = trainer.state();
  });
  auto loaded = runtime::readLatestCheckpoint(dir);
  REQUIRE(loaded);
  CHECK(loaded->step == 1);
  requireBitEqual(loaded->tensors, saved);
  std::filesystem::remove_all(dir);
}

namespace {

// A GPU backend's host for one process of a job, as the cuda backend's
// GpuProcessHost is one: the job's host for the process, wrapped; here it
// only counts the steps it runs.
class WrappedProcessHost final : public runtime::DeviceHost {
 public:
  explicit WrappedProcessHost(std::shared_ptr<runtime::DeviceHost> process) : process_(std::move(process)) {}
  bool runsHere(int device) const override { return process_->runsHere(device); }
  runtime::Communicator& communicator(int device) override { return process_->communicator(device); }
  runtime::cpu::CoreGate* cores() override { return process_->cores(); }
  void run(const std::function<void(int)>& body) override {
    ++runs;
    process_->run(body);
  }
  static inline std::atomic<int> runs{0};

 private:
  std::shared_ptr<runtime::DeviceHost> process_;
};

}  // namespace

TEST_CASE("a job on GPUs runs each process's device on the GPU backend's host for that process", "[distributed]") {
  const ir::Graph forward = traceModel("", kMlp);
  const passes::TrainingGraph training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  const runtime::ParallelPlan plan = pipeline(forward, 2, 1, 1, "1f1b", 2);
  const runtime::ParallelOptions options = optionsFor(4);
  RunResult threads = runParallel(training, plan, options, 2, 5);

  std::mutex mutex;
  std::vector<std::pair<int, int>> requests;  // (devices, local rank) of each process's request
  runtime::installGpuHosts([&](const runtime::GpuHostRequest& request) -> std::unique_ptr<runtime::DeviceHost> {
    REQUIRE(request.process);
    std::lock_guard lock(mutex);
    requests.emplace_back(request.devices, request.localRank);
    return std::make_unique<WrappedProcessHost>(request.process);
  });
  WrappedProcessHost::runs = 0;
  ThreadJob job(2);
  RunResult gpus;
  auto outcomes = runJob(job, [&](runtime::ProcessGroup& group) {
    runtime::TrainingJob description{training, plan, options, runtime::syntheticData(5)->recipe(), true};
    runtime::ProcessTrainer trainer(group, description);
    trainer.initializeState(5);
    auto data = runtime::syntheticData(5);
    for (int step = 1; step <= 2; ++step)
      gpus.losses.push_back(trainer.step(data->batch(training.graph, 4, step - 1), step).loss);
  });
  runtime::installGpuHosts(nullptr);
  for (const auto& o : outcomes) CHECK(o.code == 0);
  CHECK(requests == std::vector<std::pair<int, int>>{{2, 0}, {2, 0}});  // one a process
  CHECK(WrappedProcessHost::runs >= 2 * 2);                              // every process's steps
  CHECK(gpus.losses == threads.losses);
}

TEST_CASE("a job on GPUs without a GPU backend stops every rank with the reason", "[distributed]") {
  const ir::Graph forward = traceModel("", kMlp);
  const passes::TrainingGraph training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  const runtime::ParallelPlan plan = pipeline(forward, 2, 1, 1, "1f1b", 2);
  runtime::installGpuHosts(nullptr);
  ThreadJob job(2);
  std::string error;
  auto outcomes = runJob(job, [&](runtime::ProcessGroup& group) {
    try {
      runtime::ProcessTrainer trainer(group, {training, plan, optionsFor(4), runtime::syntheticData(5)->recipe(), true});
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  CHECK_THAT(error, Catch::Matchers::Contains("no CUDA backend is available"));
}
