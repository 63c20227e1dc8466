// describePipeline and simulatorOptions (passes/PlanPipeline.h): a plan's stages
// become pipeline ranks with data-parallel replicas, and a lowered, simulated
// plan reproduces the schedule's closed form.
#include <catch2/catch.hpp>

#include "ir/Plan.h"
#include "passes/Lowering.h"
#include "passes/PlanPipeline.h"
#include "runtime/sim/Simulator.h"

using meshflow::ir::Plan;
using meshflow::ir::PlanStage;
using meshflow::ir::ScheduleKind;
using meshflow::passes::describePipeline;
using meshflow::passes::LoweringError;
using meshflow::passes::lowerPipeline;
using meshflow::passes::PipelineDescription;
namespace ir = meshflow::ir;

namespace {

// A stage of `layers` on `devices` viewed as `mesh`, whose costs are scaled by `scale`.
PlanStage stage(int first, int end, std::vector<int> devices, std::array<std::int64_t, 2> mesh,
                double scale = 1) {
  PlanStage s;
  s.firstLayer = first;
  s.endLayer = end;
  s.submesh = {1, static_cast<std::int64_t>(devices.size())};
  s.logicalMesh = mesh;
  s.devices = std::move(devices);
  s.costs.forwardSeconds = 1 * scale;
  s.costs.backwardSeconds = 2 * scale;
  s.costs.weightGradSeconds = 1 * scale;
  s.costs.updateSeconds = 0.5 * scale;
  s.costs.activationBytes = 100 * scale;
  s.costs.heldActivationBytes = 1000 * scale;
  s.costs.parameterBytes = 5000 * scale;
  s.costs.gradientBytes = 300 * scale;
  return s;
}

Plan plan(std::vector<PlanStage> stages, ScheduleKind kind = ScheduleKind::kOneFOneB,
          int chunks = 1, int microbatches = 4) {
  Plan p;
  p.stages = std::move(stages);
  p.schedule = kind;
  p.chunks = chunks;
  p.microbatches = microbatches;
  return p;
}

}  // namespace

TEST_CASE("each stage is a rank and mesh dimension 0 splits it into replicas", "[planning]") {
  std::vector<std::string> notes;
  PipelineDescription d = describePipeline(
      plan({stage(0, 2, {0, 1, 2, 3}, {2, 2}), stage(2, 4, {4, 5, 6, 7}, {2, 2}, 2)}), &notes);
  CHECK(notes.empty());
  CHECK(d.schedule == "1f1b");
  CHECK(d.microbatches == 4);
  CHECK(d.chunks == 1);
  REQUIRE(d.stages.size() == 2);
  CHECK(d.stages[0].meshes == std::vector<std::vector<int>>{{0, 1}, {2, 3}});
  CHECK(d.stages[1].meshes == std::vector<std::vector<int>>{{4, 5}, {6, 7}});
  CHECK(d.stages[1].forwardSeconds == 2);
  CHECK(d.stages[1].backwardSeconds == 4);
  CHECK(d.stages[1].weightGradSeconds == 2);
  CHECK(d.stages[1].updateSeconds == 1);
  CHECK(d.stages[1].activationBytes == 200);
  CHECK(d.stages[1].heldActivationBytes == 2000);
  CHECK(d.stages[1].parameterBytes == 10000);
  CHECK(d.stages[1].gradientBytes == 600);
}

TEST_CASE("devices in logical-mesh order give the replicas their devices", "[planning]") {
  // A (2, 2) view whose devices the planner listed as 0, 2, 1, 3: replica 0
  // is {0, 2}, replica 1 {1, 3}.
  PipelineDescription d = describePipeline(plan({stage(0, 1, {0, 2, 1, 3}, {2, 2})}));
  CHECK(d.stages[0].meshes == std::vector<std::vector<int>>{{0, 2}, {1, 3}});
}

TEST_CASE("an interleaved rank holds the virtual stages k mod p, summed", "[planning]") {
  // 4 virtual stages on 2 ranks: rank 0 runs stages 0 and 2, rank 1 stages 1 and 3.
  PipelineDescription d =
      describePipeline(plan({stage(0, 1, {0}, {1, 1}, 1), stage(1, 2, {1}, {1, 1}, 2),
                             stage(2, 3, {0}, {1, 1}, 4), stage(3, 4, {1}, {1, 1}, 8)},
                            ScheduleKind::kInterleaved, 2));
  CHECK(d.schedule == "interleaved");
  CHECK(d.chunks == 2);
  REQUIRE(d.stages.size() == 2);
  CHECK(d.stages[0].meshes == std::vector<std::vector<int>>{{0}});
  CHECK(d.stages[0].forwardSeconds == 5);
  CHECK(d.stages[1].forwardSeconds == 10);
  CHECK(d.stages[1].backwardSeconds == 20);
  CHECK(d.stages[1].heldActivationBytes == 10000);
  // The activation is what one chunk sends: the larger of the two.
  CHECK(d.stages[1].activationBytes == 800);
}

TEST_CASE("a ZB-V rank holds the two ends of its V", "[planning]") {
  // Rank 0 runs stages 0 and 3, rank 1 stages 1 and 2.
  PipelineDescription d =
      describePipeline(plan({stage(0, 1, {0}, {1, 1}, 1), stage(1, 2, {1}, {1, 1}, 2),
                             stage(2, 3, {1}, {1, 1}, 4), stage(3, 4, {0}, {1, 1}, 8)},
                            ScheduleKind::kZeroBubbleV, 2));
  CHECK(d.schedule == "zbv");
  CHECK(d.stages[0].forwardSeconds == 9);
  CHECK(d.stages[1].forwardSeconds == 6);
}

TEST_CASE("ranks of different data parallelism become one replica each, with a note",
          "[planning]") {
  std::vector<std::string> notes;
  PipelineDescription d = describePipeline(
      plan({stage(0, 2, {0, 1, 2, 3}, {2, 2}), stage(2, 4, {4, 5, 6, 7}, {1, 4})}), &notes);
  CHECK(d.stages[0].meshes == std::vector<std::vector<int>>{{0, 1, 2, 3}});
  CHECK(d.stages[1].meshes == std::vector<std::vector<int>>{{4, 5, 6, 7}});
  REQUIRE(notes.size() == 1);
  CHECK(notes[0] ==
        "the pipeline ranks have different data-parallel degrees (logical meshes (2, 2), (1, 4)); "
        "the simulation runs each rank as one replica of its whole submesh, its gradients summed "
        "inside that mesh");
}

TEST_CASE("gradients partial inside a mesh are summed there, whatever the mesh's shape",
          "[planning]") {
  // Issue 18: a data-parallel (1, 4) stage splits the batch over dimension 1;
  // its gradients were synchronised by nobody in the simulation.
  ir::Plan columns = plan({stage(0, 2, {0, 1, 2, 3}, {1, 4}), stage(2, 4, {4, 5, 6, 7}, {1, 4})});
  columns.stages[0].costs.gradientSyncBytes = std::array<double, 3>{0, 1000, 0};
  columns.stages[1].costs.gradientSyncBytes = std::array<double, 3>{0, 0, 3000};
  PipelineDescription d = describePipeline(columns);
  REQUIRE(d.stages[0].meshSyncs.size() == 1);
  CHECK(d.stages[0].meshSyncs[0].bytes == 1000);
  CHECK(d.stages[0].meshSyncs[0].members == 4);
  CHECK(d.stages[0].meshSyncs[0].stride == 1);
  CHECK(d.stages[1].meshSyncs[0].bytes ==
        3000);  // dimension 0 has one row: all of it on dimension 1
  ir::Program program = lowerPipeline(d);
  int reduces = 0;
  for (const ir::DeviceCode& device : program.devices)
    for (const ir::Instruction& in : device.code)
      if (in.op == ir::Opcode::kAllReduce) {
        ++reduces;
        CHECK(program.groups[static_cast<std::size_t>(in.peer)].size() == 4);
      }
  CHECK(reduces == 8);

  // One replica of a whole (2, 2) mesh: columns (stride 2), rows, and all four.
  std::vector<std::string> notes;
  ir::Plan unequal = plan({stage(0, 2, {0, 1, 2, 3}, {2, 2}), stage(2, 4, {4, 5, 6, 7}, {1, 4})});
  unequal.stages[0].costs.gradientSyncBytes = std::array<double, 3>{10, 20, 30};
  PipelineDescription e = describePipeline(unequal, &notes);
  REQUIRE(e.stages[0].meshSyncs.size() == 3);
  CHECK(e.stages[0].meshSyncs[0].stride == 2);
  CHECK(e.stages[0].meshSyncs[0].members == 2);
  CHECK(e.stages[0].meshSyncs[1].stride == 1);
  CHECK(e.stages[0].meshSyncs[1].members == 2);
  CHECK(e.stages[0].meshSyncs[2].members == 4);
}

TEST_CASE("plans that describe no pipeline are refused", "[planning]") {
  CHECK_THROWS_AS(describePipeline(plan({})), LoweringError);
  CHECK_THROWS_WITH(describePipeline(plan({stage(0, 1, {0}, {1, 1}), stage(1, 2, {1}, {1, 1}),
                                           stage(2, 3, {2}, {1, 1})},
                                          ScheduleKind::kInterleaved, 2)),
                    "the plan's 3 stages do not divide into 2 chunks per rank");
  CHECK_THROWS_WITH(describePipeline(plan({stage(0, 1, {0}, {1, 1}), stage(1, 2, {1}, {1, 1}),
                                           stage(2, 3, {2}, {1, 1}), stage(3, 4, {1}, {1, 1})},
                                          ScheduleKind::kInterleaved, 2)),
                    "stages 0 and 2 both run on rank 0 but on different devices or logical meshes");
  CHECK_THROWS_WITH(describePipeline(plan({stage(0, 1, {0, 1, 2}, {2, 2})})),
                    "stage 0: logical mesh (2, 2) does not view its 3 devices");
}

TEST_CASE("a described plan lowers and simulates to the 1F1B closed form", "[planning]") {
  // p = 2, m = 4, t_F = 1, t_B = 2, nothing to send: (m + p − 1)(t_F + t_B) = 15.
  Plan p = plan({stage(0, 1, {0}, {1, 1}), stage(1, 2, {1}, {1, 1})});
  for (PlanStage& s : p.stages) {
    s.costs = ir::StageCosts{};
    s.costs.forwardSeconds = 1;
    s.costs.backwardSeconds = 2;
    s.costs.weightGradSeconds = 1;
  }
  auto result = meshflow::runtime::sim::simulate(
      meshflow::passes::lowerPipeline(describePipeline(p)),
      meshflow::passes::simulatorOptions(meshflow::ir::p3_16xlarge(1)));
  CHECK(result.makespan == Approx(15));
}

TEST_CASE("simulator options share the node's network among its devices", "[planning]") {
  meshflow::ir::Cluster cluster;
  cluster.nodes = 2;
  cluster.devicesPerNode = 8;
  cluster.intraNode = {300e9, 2e-6};
  cluster.interNode = {200e9, 10e-6};
  auto options = meshflow::passes::simulatorOptions(cluster);
  CHECK(options.devicesPerNode == 8);
  CHECK(options.intraNode.bandwidth == 300e9);
  CHECK(options.intraNode.latency == 2e-6);
  CHECK(options.interNode.bandwidth == 25e9);
  CHECK(options.interNode.latency == 10e-6);
  CHECK_FALSE(options.recordTimeline);
  // A link without bandwidth is free.
  cluster.intraNode = {0, 0};
  CHECK(meshflow::passes::simulatorOptions(cluster).intraNode.bandwidth ==
        std::numeric_limits<double>::infinity());
}
