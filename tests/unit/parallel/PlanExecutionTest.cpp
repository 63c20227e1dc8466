// From a planner's plan to the parallel runtime: parallelPlanOf chooses how a
// plan's meshes run, and what runs equals the serial reference.
#include "ParallelModels.h"

#include "ir/PlanAxes.h"
#include "passes/PlanPipeline.h"
#include "passes/Planner.h"
#include "runtime/parallel/PlanExecution.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

// Four devices of one node, as cpu(devices = 4) describes them.
ir::Cluster cpuCluster() {
  ir::Cluster c;
  c.nodes = 1;
  c.devicesPerNode = 4;
  c.device = {"cpu-thread", 4.0 * (1 << 30), 50e9, 20e9};
  c.intraNode = {10e9, 1e-6};
  c.interNode = c.intraNode;
  return c;
}

// The planner's 2-stage plan of a small GPT on 4 cpu devices, pinned to
// (1, 2) meshes of two devices each.
ir::Plan twoStagePlan(const ir::Graph& forward) {
  passes::PlanRequest request;
  request.globalBatch = 8;
  request.stages = 2;
  request.microbatches = 2;
  request.maxTensorParallel = 2;
  request.dataParallel = 1;
  ir::Plan plan = passes::planTraining(forward, cpuCluster(), request);
  REQUIRE(plan.stages.size() == 2);
  return plan;
}

const char* kGpt = "gpt(layers = 2, hidden = 16, heads = 2, seq = 4, vocab = 24)";

}  // namespace

TEST_CASE("a plan whose stages share their rows runs them as replicas", "[parallel][plan]") {
  ir::Graph forward = traceModel("", kGpt);
  ir::Plan plan = twoStagePlan(forward);
  runtime::ParallelPlan parallel = runtime::parallelPlanOf(forward, plan);
  CHECK(passes::sameDataParallelRows(plan));
  CHECK(parallel.replicas() == 1);
  CHECK(parallel.meshOf(0) == std::array<std::int64_t, 2>{1, 2});
  CHECK(runtime::parallelPlanText(parallel, 8) == "2 stages × 1 replica × 2 tensor-parallel, " +
                                                      parallel.schedule + ", 2 microbatches of 4, 4 devices");
  // With the planned plan the mesh's axis is named by what its strategies do
  // with it (ir/PlanAxes.h), not by the mesh's convention: this tiny model's
  // (1, 2) meshes split no weights, so they are not tensor-parallel.
  std::string carries = ir::axisRoles(plan.stages[0])[1].text();
  CHECK(carries.find("tensor") == std::string::npos);
  std::string axis = carries == "replicated" ? " × 2 replicated" : " × 2 " + carries + "-parallel";
  CHECK(runtime::parallelPlanText(parallel, 8, &plan) ==
        "2 stages × 1 replica" + axis + ", " + parallel.schedule + ", 2 microbatches of 4, 4 devices");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  requireSameRun(runParallel(training, parallel, optionsFor(8), 2, 5), runSerial(training, 8, 2, 5));
}

TEST_CASE("a plan whose stages differ in rows runs each rank as one mesh", "[parallel][plan]") {
  // Stage 0 on one device, stage 1 on a (2, 1) mesh of two: the activations
  // and gradients between them travel in tiles, and stage 1 runs its planned
  // strategies along mesh dimension 0.
  ir::Graph forward = traceModel("", kGpt);
  ir::Plan plan = twoStagePlan(forward);
  plan.stages[0].logicalMesh = {1, 1};
  plan.stages[0].submesh = {1, 1};
  plan.stages[0].devices = {0};
  plan.stages[1].logicalMesh = {2, 1};
  plan.stages[1].devices = {1, 2};
  CHECK_FALSE(passes::sameDataParallelRows(plan));
  runtime::ParallelPlan parallel = runtime::parallelPlanOf(forward, plan);
  CHECK(parallel.replicas() == 1);
  CHECK(parallel.meshOf(0) == std::array<std::int64_t, 2>{1, 1});
  CHECK(parallel.meshOf(1) == std::array<std::int64_t, 2>{2, 1});
  CHECK(runtime::parallelPlanText(parallel, 8) ==
        "2 stages × 1 replica on meshes (1, 1), (2, 1), " + parallel.schedule + ", 2 microbatches of 4, 3 devices");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelTrainer trainer(training, parallel, optionsFor(8));
  int gathers = 0;
  for (const ir::DeviceCode& code : trainer.program().devices)
    for (const ir::Instruction& in : code.code) gathers += in.op == ir::Opcode::kAllGather ? 1 : 0;
  CHECK(gathers > 0);
  requireSameRun(runParallel(training, parallel, optionsFor(8), 2, 5), runSerial(training, 8, 2, 5));
}

TEST_CASE("a plan for another model is refused by name", "[parallel][plan]") {
  ir::Graph forward = traceModel("", kGpt);
  ir::Plan plan = twoStagePlan(forward);
  REQUIRE_FALSE(plan.stages[1].strategies.empty());
  plan.stages[1].strategies[0].kind = "softmax";
  CHECK_THROWS_WITH(runtime::parallelPlanOf(forward, plan),
                    Catch::StartsWith("the plan does not fit the model: its op"));
}

TEST_CASE("shard_optimizer reaches the runtime on stages with replicas", "[parallel][plan][zero]") {
  // shardOptimizerState = true (the hint) makes every stage sharded in the
  // plan; the runtime shards the ranks that have data-parallel replicas and
  // says so, and what it computes still equals the serial reference. With
  // one replica ((1, 2) meshes) the flag changes nothing at run time.
  ir::Graph forward = traceModel("", kGpt);
  passes::PlanRequest request;
  request.globalBatch = 8;
  request.stages = 2;
  request.microbatches = 2;
  request.maxTensorParallel = 1;
  request.dataParallel = 2;
  request.shardOptimizerState = true;
  ir::Plan plan = passes::planTraining(forward, cpuCluster(), request);
  REQUIRE(plan.stages.size() == 2);
  for (const ir::PlanStage& stage : plan.stages) CHECK(stage.costs.shardedOptimizerState);
  runtime::ParallelPlan parallel = runtime::parallelPlanOf(forward, plan);
  CHECK(parallel.replicas() == 2);
  CHECK(parallel.shardOptimizer == std::vector<bool>{true, true});
  CHECK(runtime::parallelPlanText(parallel, 8) ==
        "2 stages × 2 replicas (sharded optimizer), " + parallel.schedule + ", 2 microbatches of 2, 4 devices");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  runtime::ParallelTrainer trainer(training, parallel, optionsFor(8));
  int scatters = 0;
  for (const ir::DeviceCode& code : trainer.program().devices)
    for (const ir::Instruction& in : code.code) scatters += in.op == ir::Opcode::kReduceScatter ? 1 : 0;
  CHECK(scatters > 0);
  requireSameRun(runParallel(training, parallel, optionsFor(8), 2, 5), runSerial(training, 8, 2, 5));

  request.shardOptimizerState = false;
  runtime::ParallelPlan whole = runtime::parallelPlanOf(forward, passes::planTraining(forward, cpuCluster(), request));
  CHECK(whole.shardOptimizer == std::vector<bool>{false, false});

  request.shardOptimizerState = true;
  request.dataParallel = 1;
  request.maxTensorParallel = 2;
  runtime::ParallelPlan single = runtime::parallelPlanOf(forward, passes::planTraining(forward, cpuCluster(), request));
  CHECK(single.shardOptimizer == std::vector<bool>{false, false});
}
