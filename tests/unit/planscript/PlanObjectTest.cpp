// A plan value's texts and simulation (interp/PlanObject.h) on hand-made plans.
#include <catch2/catch.hpp>

#include "interp/PlanObject.h"
#include "meshflow/Error.h"

using namespace meshflow;

namespace {

ir::OpStrategy matmul(ir::OpId id, std::string scope) {
  ir::OpStrategy op;
  op.op = id;
  op.kind = "matmul";
  op.scope = std::move(scope);
  op.name = "RS1 = RR x RS1";
  op.inputs = {"RR", "RS1"};
  op.outputs = {"RS1"};
  op.cost = 0;
  op.alternatives = {{"RS1 = RR x RS1", 0}, {"RR = RS1 x S1R", 0.00015}};
  return op;
}

ir::PlanStage stage(int first, std::vector<int> devices, std::vector<ir::OpStrategy> ops) {
  ir::PlanStage s;
  s.firstLayer = first;
  s.endLayer = first + 1;
  s.submesh = {1, static_cast<std::int64_t>(devices.size())};
  s.logicalMesh = {1, static_cast<std::int64_t>(devices.size())};
  s.devices = std::move(devices);
  s.strategies = std::move(ops);
  s.costs.forwardSeconds = 1;
  s.costs.backwardSeconds = 2;
  s.costs.weightGradSeconds = 1;
  return s;
}

// Two stages on one device each, 1F1B with 2 microbatches, t_F = 1, t_B = 2.
ir::Plan twoStages() {
  ir::Plan plan;
  plan.stages = {stage(0, {0}, {matmul(3, "block0.mlp.fc1"), matmul(5, "block0.mlp.fc2")}),
                 stage(1, {1}, {matmul(9, "block1.mlp.fc1"), matmul(12, "")})};
  plan.microbatches = 2;
  plan.stepTime = 9;
  return plan;
}

ir::Cluster freeCluster() {
  ir::Cluster cluster;
  cluster.devicesPerNode = 2;
  return cluster;
}

}  // namespace

TEST_CASE("explain lists the ops under a scope with their alternatives", "[planscript]") {
  CHECK(interp::explainPlan(twoStages(), "block0.mlp.fc1") ==
        "block0.mlp.fc1  matmul (op 3), stage 0, mesh (1, 1): RR, RS1 -> RS1\n"
        "  * RS1 = RR x RS1        0 s\n"
        "    RR = RS1 x S1R     150 us\n");
  // A chosen strategy missing from the alternatives comes first with its own cost.
  ir::Plan plan = twoStages();
  plan.stages[0].strategies[0].alternatives.erase(
      plan.stages[0].strategies[0].alternatives.begin());
  plan.stages[0].strategies[0].cost = 2e-6;
  CHECK(interp::explainPlan(plan, "block0.mlp.fc1") ==
        "block0.mlp.fc1  matmul (op 3), stage 0, mesh (1, 1): RR, RS1 -> RS1\n"
        "  * RS1 = RR x RS1       2 us\n"
        "    RR = RS1 x S1R     150 us\n");
  // A prefix covers the scopes under it, at a dot: block1 is not under block.
  std::string block0 = interp::explainPlan(twoStages(), "block0");
  CHECK(block0.find("block0.mlp.fc1") != std::string::npos);
  CHECK(block0.find("block0.mlp.fc2") != std::string::npos);
  CHECK(interp::explainPlan(twoStages(), "block").empty());
  CHECK(interp::explainPlan(twoStages(), "block0.mlp.fc").empty());
  // A glob matches whole scopes.
  std::string fc1 = interp::explainPlan(twoStages(), "block*.fc1");
  CHECK(fc1.find("block0.mlp.fc1") != std::string::npos);
  CHECK(fc1.find("block1.mlp.fc1  matmul (op 9), stage 1") != std::string::npos);
  CHECK(fc1.find("fc2") == std::string::npos);
  CHECK(interp::explainPlan(twoStages(), "*").find("(top level)  matmul (op 12)") !=
        std::string::npos);
}

TEST_CASE("explain shows the bound and gap of a stage not proven optimal", "[planscript]") {
  ir::Plan plan = twoStages();
  plan.notes = {"intra-op sharding of stage 1 (layer 1) is the best found in the time budget, "
                "not proven optimal: objective 0.002 s, bound 0.0019 s, gap 5.00%"};
  CHECK(interp::explainPlan(plan, "block0.mlp.fc1").find("note") == std::string::npos);
  CHECK(interp::explainPlan(plan, "block1.mlp.fc1") ==
        "block1.mlp.fc1  matmul (op 9), stage 1, mesh (1, 1): RR, RS1 -> RS1\n"
        "  * RS1 = RR x RS1        0 s\n"
        "    RR = RS1 x S1R     150 us\n"
        "  note: intra-op sharding of stage 1 (layer 1) is the best found in the time budget, "
        "not proven optimal: objective 0.002 s, bound 0.0019 s, gap 5.00%\n");
}

TEST_CASE("the timeline draws each rank's simulated step", "[planscript]") {
  interp::PlanObject plan(twoStages(), freeCluster(), "toy");
  const interp::PlanSimulation& simulation = plan.simulation();
  CHECK(simulation.result.makespan == Approx(9));
  // 72 columns of 1/8: F0 [0, 1), F1 [1, 2), B0 [4, 6), B1 [7, 9) on rank 0.
  CHECK(interp::planTimeline(plan.plan(), simulation) ==
        "one step, simulated: 9 s on 2 pipeline ranks, 1f1b, 2 microbatches; one column = 125 ms\n"
        "rank 0 (device 0) |" +
            std::string(8, 'F') + std::string(8, 'f') + std::string(16, '.') +
            std::string(16, 'B') + std::string(8, '.') + std::string(16, 'b') +
            "| busy 67%\n"
            "rank 1 (device 1) |" +
            std::string(8, '.') + std::string(8, 'F') + std::string(16, 'B') + std::string(8, 'f') +
            std::string(16, 'b') + std::string(16, '.') +
            "| busy 67%\n"
            "F forward, B backward, I input gradient, W weight gradient (odd microbatches in lower "
            "case), U optimizer step, . idle\n");
}

TEST_CASE("a plan that cannot be lowered is a PlanningError", "[planscript]") {
  ir::Plan broken = twoStages();
  broken.stages[1].devices = {0};  // both ranks on device 0
  interp::PlanObject plan(broken, freeCluster(), "toy");
  try {
    plan.simulation();
    FAIL("no error");
  } catch (const ScriptError& error) {
    CHECK(error.kind() == DiagnosticKind::PlanningError);
    CHECK(std::string(error.what()) ==
          "cannot simulate the plan: device 0 appears in more than one mesh");
  }
}
