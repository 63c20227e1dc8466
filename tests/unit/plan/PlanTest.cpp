// ir::Plan: JSON round-trip, the printed table, and the exports.
#include <catch2/catch.hpp>

#include "ir/Plan.h"

namespace meshflow::ir {
namespace {

OpStrategy matmulStrategy(OpId op, const std::string& scope) {
  return {.op = op,
          .kind = "matmul",
          .scope = scope,
          .name = "RS1 = RR x RS1",
          .inputs = {"RR", "RS1"},
          .outputs = {"RS1"},
          .cost = 0,
          .alternatives = {{"RS1 = RR x RS1", 0}, {"RR = RS1 x S1R", 1.5e-4}}};
}

// Four stages of two layers, each on half a node of 8 viewed as (2, 2).
Plan uniformPlan() {
  Plan p;
  for (int s = 0; s < 4; ++s) {
    PlanStage stage;
    stage.firstLayer = 2 * s;
    stage.endLayer = 2 * s + 2;
    stage.submesh = {1, 4};
    stage.logicalMesh = {2, 2};
    for (int d = 0; d < 4; ++d) stage.devices.push_back(4 * s + d);
    stage.latency = 0.0125;
    stage.peakMemoryBytes = (10.0 + s) * (1 << 30);
    stage.strategies = {matmulStrategy(OpId(10 * s + 3), "block" + std::to_string(2 * s) + ".mlp"),
                        {.op = OpId(10 * s + 4),
                         .kind = "add",
                         .scope = "block" + std::to_string(2 * s) + ".mlp",
                         .name = "",
                         .inputs = {"S0R+P1", "R"},
                         .outputs = {"S0R"},
                         .cost = 2.5e-5,
                         .alternatives = {}}};
    p.stages.push_back(stage);
  }
  p.microbatches = 8;
  p.schedule = ScheduleKind::kOneFOneB;
  p.globalBatch = 64;
  p.stepTime = 0.1375;
  p.samplesPerSecond = 64 / 0.1375;
  p.tflopsPerDevice = 98.25;
  p.mfu = 0.315;
  p.alternatives = {{"4 stages x (1, 4), mesh (2, 2)", 0.1375, nullptr},
                    {"2 stages x (2, 8), mesh (2, 8)", 0.21, nullptr}};
  p.notes = {"intra-op sharding of stage 3 is not proven optimal"};
  return p;
}

// Three stages of unequal sizes and meshes.
Plan nonUniformPlan() {
  Plan p = uniformPlan();
  p.stages.pop_back();
  p.stages[2].endLayer = 8;
  p.stages[2].submesh = {1, 8};
  p.stages[2].logicalMesh = {1, 8};
  p.stages[2].devices = {8, 9, 10, 11, 12, 13, 14, 15};
  return p;
}

TEST_CASE("a plan round-trips through JSON", "[plan][json]") {
  for (const Plan& plan : {uniformPlan(), nonUniformPlan()}) {
    nlohmann::json j = planToJson(plan);
    CHECK(planFromJson(j) == plan);
    // And through its text, as `p.save(path)` writes it.
    CHECK(planFromJson(nlohmann::json::parse(j.dump())) == plan);
  }
}

TEST_CASE("the plan JSON has the documented keys", "[plan][json]") {
  nlohmann::json j = planToJson(nonUniformPlan());
  CHECK(j["stages"][0]["layers"] == nlohmann::json::array({0, 2}));
  CHECK(j["stages"][2]["layers"] == nlohmann::json::array({4, 8}));
  CHECK(j["stages"][2]["submesh"] == nlohmann::json::array({1, 8}));
  CHECK(j["stages"][1]["logical_mesh"] == nlohmann::json::array({2, 2}));
  CHECK(j["stages"][1]["devices"] == nlohmann::json::array({4, 5, 6, 7}));
  CHECK(j["microbatches"] == 8);
  CHECK(j["schedule"] == "1f1b");
  CHECK(j["step_time_s"] == 0.1375);
  CHECK(j["peak_memory_bytes"] == 12.0 * (1 << 30));  // the largest of any device
  CHECK(j["tflops_per_device"] == 98.25);
  CHECK(j["stages"][0]["strategies"][0]["outputs"] == nlohmann::json::array({"RS1"}));
}

TEST_CASE("malformed plan JSON names the path", "[plan][json]") {
  nlohmann::json good = planToJson(uniformPlan());
  auto broken = [&](auto edit) {
    nlohmann::json j = good;
    edit(j);
    return j;
  };
  CHECK_THROWS_WITH(planFromJson(broken([](auto& j) { j.erase("microbatches"); })),
                    "microbatches: missing");
  CHECK_THROWS_WITH(planFromJson(broken([](auto& j) { j["stages"][1]["extra"] = 1; })),
                    "stages[1].extra: unknown key");
  CHECK_THROWS_WITH(planFromJson(broken([](auto& j) { j["schedule"] = "2f2b"; })),
                    "schedule: unknown schedule '2f2b'");
  CHECK_THROWS_WITH(planFromJson(broken([](auto& j) {
                      j["stages"][0]["logical_mesh"] = {3, 2};
                    })),
                    "stages[0].logical_mesh: (3, 2) does not view the 4 devices of submesh (1, 4)");
  CHECK_THROWS_WITH(
      planFromJson(broken([](auto& j) { j["stages"][0]["strategies"][0]["outputs"][0] = "SX"; })),
      Catch::StartsWith("stages[0].strategies[0].outputs[0]: bad sharding spec 'SX'"));
  CHECK_THROWS_WITH(planFromJson(broken([](auto& j) {
                      j["stages"][2]["layers"] = {4, 4};
                    })),
                    "stages[2].layers: expected [first, last_exclusive] with first < last, got "
                    "[4, 4]");
  // The stages take the layers in order: no gap, no overlap, from layer 0
  // (fuzz_plan: overlapping stages overflowed an export's layer arithmetic).
  CHECK_THROWS_WITH(planFromJson(broken([](auto& j) { j["stages"][1]["layers"] = {1, 4}; })),
                    "stages[1].layers: stage 1 starts at layer 1, expected 2 (where stage 0 "
                    "ends): a plan's stages take the layers in order");
  CHECK_THROWS_WITH(planFromJson(broken([](auto& j) { j["stages"][0]["layers"] = {1, 2}; })),
                    "stages[0].layers: stage 0 starts at layer 1, expected 0 (the first layer): "
                    "a plan's stages take the layers in order");
}

TEST_CASE("the plan prints as a table", "[plan][table]") {
  CHECK(planTable(nonUniformPlan()) ==
        "plan: 3 stages on 3 pipeline ranks, schedule 1f1b, 8 microbatches\n"
        "step 138 ms, 465.5 samples/s, 98.25 TFLOP/s per device, MFU 31.5%\n"
        "peak memory 12 GiB per device\n"
        "stage  layers     submesh   mesh      devices        latency    memory     axes           "
        "recompute  optimizer\n"
        "0      [0, 2)     (1, 4)    (2, 2)    0-3            12.5 ms    10 GiB     data x tensor  "
        "none       whole\n"
        "1      [2, 4)     (1, 4)    (2, 2)    4-7            12.5 ms    11 GiB     data x tensor  "
        "none       whole\n"
        "2      [4, 8)     (1, 8)    (1, 8)    8-15           12.5 ms    12 GiB     tensor         "
        "none       whole\n"
        "memory per device     weights  gradients  optimizer activations       peak  comm buffers, "
        "outside the peak\n"
        "stage 0                   0 B        0 B        0 B      10 GiB     10 GiB  0 B\n"
        "stage 1                   0 B        0 B        0 B      11 GiB     11 GiB  0 B\n"
        "stage 2                   0 B        0 B        0 B      12 GiB     12 GiB  0 B\n"
        "alternatives considered (p.alternatives[i]):\n"
        "  [0] 4 stages x (1, 4), mesh (2, 2)           step 138 ms\n"
        "  [1] 2 stages x (2, 8), mesh (2, 8)           step 210 ms\n"
        "note: intra-op sharding of stage 3 is not proven optimal\n");

  // With the model's sequence: tokens/s, the time of a billion tokens, and
  // MFU with recomputation counted beside the model's.
  Plan p = nonUniformPlan();
  p.model.sequence = 1024;
  p.mfuWithRecompute = 0.42;
  p.simulatedStepTime = 0.14;
  std::string table = planTable(p);
  CHECK(table.find("step 138 ms (simulated 140 ms), 465.5 samples/s, 476.6k tokens/s, 98.25 "
                   "TFLOP/s per device, MFU 31.5% (42.0% with recomputation counted)\n") !=
        std::string::npos);
  CHECK(table.find("1e9 tokens take 35 min; peak memory 12 GiB per device\n") != std::string::npos);
}

TEST_CASE("Megatron flags for a uniform plan", "[plan][export]") {
  PlanExport flags = megatronFlags(uniformPlan());
  REQUIRE(flags.ok());
  CHECK(flags.text ==
        "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 "
        "--global-batch-size 64 --micro-batch-size 4");

  // Interleaved: four virtual stages on two ranks, two chunks each.
  Plan interleaved = uniformPlan();
  interleaved.schedule = ScheduleKind::kInterleaved;
  interleaved.chunks = 2;
  PlanExport v = megatronFlags(interleaved);
  REQUIRE(v.ok());
  CHECK(v.text ==
        "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
        "--num-layers-per-virtual-pipeline-stage 2 --global-batch-size 64 --micro-batch-size 4");
}

TEST_CASE("Megatron flags explain why a plan is not uniform", "[plan][export]") {
  PlanExport flags = megatronFlags(nonUniformPlan());
  CHECK_FALSE(flags.ok());
  CHECK(flags.text.empty());
  CHECK(flags.whyNot ==
        "stage 2 uses logical mesh (1, 8) but stage 0 uses (2, 2); Megatron-LM gives every stage "
        "the same tensor and data parallelism");

  Plan uneven = uniformPlan();
  uneven.stages[2].endLayer = 5;
  uneven.stages[3].firstLayer = 5;
  CHECK(megatronFlags(uneven).whyNot ==
        "stage 2 holds 1 layers but stage 0 holds 2; Megatron-LM splits the layers evenly");

  Plan zb = uniformPlan();
  zb.schedule = ScheduleKind::kZeroBubbleH1;
  CHECK(megatronFlags(zb).whyNot ==
        "Megatron-LM runs 1f1b and interleaved 1f1b schedules; this plan uses zb-h1 with 1 "
        "chunk per rank");
}

TEST_CASE("JAX PartitionSpecs of single specs", "[plan][export]") {
  CHECK(jaxPartitionSpec(ShardingSpec::parse("S0R")) == "PartitionSpec('data', None)");
  CHECK(jaxPartitionSpec(ShardingSpec::parse("RS1")) == "PartitionSpec(None, 'model')");
  CHECK(jaxPartitionSpec(ShardingSpec::parse("S01R")) == "PartitionSpec(('data', 'model'), None)");
  CHECK(jaxPartitionSpec(ShardingSpec::parse("RR+P1")) == "PartitionSpec(None, None)");
  CHECK(jaxPartitionSpec(ShardingSpec::parse("()")) == "PartitionSpec()");
}

TEST_CASE("JAX and Alpa specs of every op output", "[plan][export]") {
  for (const Plan& plan : {uniformPlan(), nonUniformPlan()}) {
    std::vector<SpecRow> jax = jaxPartitionSpecs(plan);
    std::vector<SpecRow> alpa = alpaSpecs(plan);
    REQUIRE(jax.size() == 2 * plan.stages.size());
    REQUIRE(alpa.size() == jax.size());
    CHECK(jax[0] == SpecRow{0, 3, "matmul", "block0.mlp", 0, "PartitionSpec(None, 'model')", ""});
    CHECK(jax[1] == SpecRow{0, 4, "add", "block0.mlp", 0, "PartitionSpec('data', None)", ""});
    CHECK(alpa[0] == SpecRow{0, 3, "matmul", "block0.mlp", 0, "RS1", ""});
    CHECK(alpa[5] == SpecRow{2, 24, "add", "block4.mlp", 0, "S0R", ""});
  }
  Plan partial = uniformPlan();
  partial.stages[0].strategies[0].outputs = {"RR+P1"};
  SpecRow row = jaxPartitionSpecs(partial)[0];
  CHECK(row.spec == "PartitionSpec(None, None)");
  CHECK(row.note == "partial sum over 'model': reduce (psum) before use");
  CHECK(alpaSpecs(partial)[0].spec == "RR+P1");
}

}  // namespace
}  // namespace meshflow::ir
