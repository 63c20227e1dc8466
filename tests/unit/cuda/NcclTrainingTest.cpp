// Training whose devices communicate through cuda::NcclCommunicator (on the
// fake NCCL, LocalCluster endpoints as the control channel): data-parallel,
// tensor-parallel and pipelined plans give the cpu backend's losses and state
// within tolerance (NCCL sums in its own order, so not bit for bit).
#include "../parallel/ParallelModels.h"
#include "tests/unit/cuda/NcclTestCluster.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

// The devices of a NcclTestCluster as the trainer's DeviceHost.
class NcclTestHost final : public runtime::DeviceHost {
 public:
  explicit NcclTestHost(int devices) : cluster_(devices) {}
  bool runsHere(int device) const override { return cluster_.control.runsHere(device); }
  runtime::Communicator& communicator(int device) override { return cluster_.communicator(device); }
  runtime::cpu::CoreGate* cores() override { return cluster_.control.cores(); }
  void run(const std::function<void(int device)>& body) override { cluster_.run(body); }

 private:
  test::NcclTestCluster cluster_;
};

runtime::ParallelPlan replicatedStages(const ir::Graph& forward, int stages, int replicas) {
  runtime::ParallelPlan plan;
  plan.virtualStages = stages;
  plan.stageOfForwardOp = evenStages(forward, stages);
  plan.rankDevices.assign(static_cast<std::size_t>(stages), {});
  for (int i = 0; i < replicas; ++i)
    for (int r = 0; r < stages; ++r)
      plan.rankDevices[static_cast<std::size_t>(r)].push_back(i * stages + r);
  plan.schedule = "1f1b";
  plan.microbatches = 2;
  return plan;
}

}  // namespace

TEST_CASE("plans trained through the NCCL communicator match the cpu backend within tolerance",
          "[cuda][nccl]") {
  const char* model = "gpt(layers = 2, hidden = 16, heads = 2, seq = 4, vocab = 24)";
  const ir::Graph forward = traceModel("", model);
  const passes::TrainingGraph training =
      passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  struct Case {
    std::string name;
    runtime::ParallelPlan plan;
    int devices;
  };
  std::vector<Case> cases;
  cases.push_back({"data parallel, 4 replicas", replicatedStages(forward, 1, 4), 4});
  Case sharded{"sharded optimizer, 2 replicas", replicatedStages(forward, 1, 2), 2};
  sharded.plan.shardOptimizer = {true};
  cases.push_back(sharded);
  cases.push_back({"1f1b, 2 stages x 2 replicas", replicatedStages(forward, 2, 2), 4});
  Case tensor{"tensor parallel (1, 2) x 2 stages", replicatedStages(forward, 2, 1), 4};
  tensor.plan.rankDevices = {{0, 1}, {2, 3}};
  tensor.plan.rankMeshes = {{1, 2}, {1, 2}};
  std::mt19937 rng(7);
  tensor.plan.strategies = randomStrategies(forward, 2, {1, 2}, rng);
  cases.push_back(tensor);

  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.name) {
      const runtime::ParallelOptions options = optionsFor(8);
      const RunResult cpu = runParallel(training, c.plan, options, 3, 5);
      const RunResult nccl =
          runParallel(training, c.plan, options, 3, 5, std::make_unique<NcclTestHost>(c.devices));
      REQUIRE(nccl.losses.size() == cpu.losses.size());
      for (std::size_t i = 0; i < cpu.losses.size(); ++i)
        CHECK(nccl.losses[i] == Approx(cpu.losses[i]).epsilon(1e-5));
      REQUIRE(nccl.state.size() == cpu.state.size());
      for (const auto& [name, tensor] : cpu.state) {
        INFO(name);
        CHECK(countFar(nccl.state.at(name), tensor, 1e-4, 1e-6) == 0);
      }
    }
  }
}
