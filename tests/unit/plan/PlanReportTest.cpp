// What a user reads to decide: the memory breakdown, what each mesh axis
// carries, the exports (Megatron-LM, DeepSpeed, PyTorch) with the nearest
// expressible plan, and the saved plan file (ir/PlanMemory.h, ir/PlanAxes.h,
// ir/Plan.h, ir/PlanFile.h).
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>

#include "ir/PlanAxes.h"
#include "ir/PlanFile.h"
#include "ir/PlanMemory.h"

namespace meshflow::ir {
namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

OpStrategy leaf(OpId op, const char* kind, const std::string& scope, const char* output) {
  return {.op = op, .kind = kind, .scope = scope, .name = "", .inputs = {}, .outputs = {output},
          .cost = 0, .alternatives = {}};
}

OpStrategy compute(OpId op, const char* kind, const std::string& scope, const char* output) {
  return {.op = op, .kind = kind, .scope = scope, .name = "", .inputs = {"RR"},
          .outputs = {output}, .cost = 0, .alternatives = {}};
}

// `stages` stages of two layers on (a, b) meshes of a node of 8, with the
// leaves' layouts of Megatron's tensor parallelism: the batch split over axis
// 0, the weights over axis 1, the layer norms' activations over the sequence
// on axis 1.
Plan megatronLike(int stages, std::array<std::int64_t, 2> mesh) {
  Plan p;
  const std::int64_t devices = mesh[0] * mesh[1];
  for (int s = 0; s < stages; ++s) {
    PlanStage stage;
    stage.firstLayer = 2 * s;
    stage.endLayer = 2 * s + 2;
    stage.submesh = {1, devices};
    stage.logicalMesh = mesh;
    for (int d = 0; d < devices; ++d) stage.devices.push_back(int(devices * s + d));
    std::string scope = "block" + std::to_string(2 * s);
    stage.strategies = {leaf(OpId(10 * s), "input", "", "S0R"),
                        leaf(OpId(10 * s + 1), "parameter", scope + ".mlp.fc1", "RS1"),
                        compute(OpId(10 * s + 2), "layer_norm", scope + ".ln1", "S0S1R"),
                        compute(OpId(10 * s + 3), "matmul", scope + ".mlp.fc1", "S0RS1")};
    stage.latency = 0.01;
    stage.peakMemoryBytes = 10 * kGiB;
    stage.costs.parameterBytes = 3 * kGiB;
    stage.costs.optimizerStateBytes = 2 * kGiB;
    stage.costs.gradientBytes = 0.5 * kGiB;
    stage.costs.activationBytes = 0.125 * kGiB;
    p.stages.push_back(stage);
  }
  p.microbatches = 8;
  p.globalBatch = 64;
  p.stepTime = 0.2;
  p.samplesPerSecond = 320;
  p.model = {.blocks = 2 * stages, .hidden = 1024, .heads = 16, .sequence = 2048,
             .precision = "bf16"};
  return p;
}

TEST_CASE("each mesh axis carries what the strategies do with it", "[plan][axes]") {
  Plan p = megatronLike(2, {2, 4});
  std::array<AxisRoles, 2> roles = axisRoles(p.stages[0]);
  CHECK(roles[0].text() == "data");
  CHECK(roles[1].text() == "tensor+sequence");
  CHECK(axesText(p.stages[0]) == "data x tensor+sequence");

  // The (1, 2) mesh: every weight replicated, the batch split over
  // axis 1 — data parallelism, whatever the mesh's shape says.
  PlanStage dp = p.stages[0];
  dp.logicalMesh = {1, 2};
  dp.strategies = {leaf(0, "input", "", "S1R"), leaf(1, "parameter", "block0.mlp.fc1", "RR"),
                   compute(2, "matmul", "block0.mlp.fc1", "S1RR")};
  CHECK(axesText(dp) == "data");
  CHECK(degreeOf(axisRoles(dp), &AxisRoles::tensor) == 1);
  CHECK(degreeOf(axisRoles(dp), &AxisRoles::data) == 2);
}

TEST_CASE("memory per rank adds up to the peak", "[plan][memory]") {
  Plan p = megatronLike(2, {2, 4});
  std::vector<RankMemory> ranks = planMemory(p);
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[0].weights == 1 * kGiB);
  CHECK(ranks[0].optimizerState == 2 * kGiB);
  CHECK(ranks[0].gradients == 0.5 * kGiB);
  CHECK(ranks[0].activations == 6.5 * kGiB);
  CHECK(ranks[0].weights + ranks[0].gradients + ranks[0].optimizerState + ranks[0].activations ==
        ranks[0].peak);
  // Stage 0 sends one activation and syncs a 25 MiB bucket; stage 1 also receives one.
  CHECK(ranks[0].communicationBuffers == 0.125 * kGiB + 25.0 * 1024 * 1024);
  CHECK(ranks[1].communicationBuffers == 0.25 * kGiB + 25.0 * 1024 * 1024);
  CHECK(memoryTable(p) ==
        "memory per device     weights  gradients  optimizer activations       peak  comm buffers, outside the peak\n"
        "stage 0                 1 GiB    512 MiB      2 GiB     6.5 GiB     10 GiB  153 MiB\n"
        "stage 1                 1 GiB    512 MiB      2 GiB     6.5 GiB     10 GiB  281 MiB\n");

  // Interleaved: a rank holds both its chunks.
  Plan v = megatronLike(4, {2, 4});
  v.schedule = ScheduleKind::kInterleaved;
  v.chunks = 2;
  std::vector<RankMemory> vranks = planMemory(v);
  REQUIRE(vranks.size() == 2);
  CHECK(vranks[1].stages == std::vector<int>{1, 3});
  CHECK(vranks[1].weights == 2 * kGiB);
  CHECK(vranks[1].activations == 10 * kGiB - 2 * kGiB - 4 * kGiB - 1 * kGiB);
}

TEST_CASE("Megatron flags from what the axes carry and the model's facts", "[plan][export]") {
  Plan p = megatronLike(2, {2, 4});
  p.stages[0].costs.recompute = p.stages[1].costs.recompute = "full";
  p.stages[0].costs.shardedOptimizerState = p.stages[1].costs.shardedOptimizerState = true;
  PlanExport flags = megatronFlags(p);
  REQUIRE(flags.ok());
  CHECK(flags.text ==
        "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 2 --num-layers 4 "
        "--hidden-size 1024 --num-attention-heads 16 --seq-length 2048 --global-batch-size 64 "
        "--micro-batch-size 4 --sequence-parallel --recompute-granularity full "
        "--recompute-method uniform --recompute-num-layers 1 --use-distributed-optimizer --bf16");

  // The same mesh carrying data on both axes: no tensor parallelism.
  Plan dp = megatronLike(2, {1, 2});
  for (PlanStage& s : dp.stages)
    s.strategies = {leaf(0, "input", "", "S1R"), leaf(1, "parameter", "block0.mlp.fc1", "RR")};
  PlanExport d = megatronFlags(dp);
  REQUIRE(d.ok());
  CHECK(d.text.rfind("--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2", 0) == 0);
  CHECK(d.text.find("--micro-batch-size 4") != std::string::npos);  // 64 / (2 replicas x 8)

  // One axis carrying tensor and expert parallelism (found by fuzz_plan: the
  // replicas were the mesh over tp x ep, 2 / 4 = 0, and the batch flags
  // divided by zero). Axis 0 holds the replicas.
  Plan moe = megatronLike(2, {2, 2});
  for (PlanStage& s : moe.stages)
    s.strategies = {leaf(0, "input", "", "S0R"), leaf(1, "parameter", "block0.mlp.fc1", "RS1"),
                    leaf(2, "parameter", "block0.moe.w1", "S1RR")};
  PlanExport e = megatronFlags(moe);
  REQUIRE(e.ok());
  CHECK(e.text.rfind("--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 "
                     "--expert-model-parallel-size 2", 0) == 0);
  CHECK(e.text.find("--micro-batch-size 4") != std::string::npos);  // 64 / (2 replicas x 8)
}

TEST_CASE("an export that cannot express a plan names the nearest it can", "[plan][export]") {
  Plan zb = megatronLike(2, {2, 4});
  zb.schedule = ScheduleKind::kZeroBubbleH1;
  PlanExport m = megatronFlags(zb);
  CHECK_FALSE(m.ok());
  CHECK(m.whyNot ==
        "Megatron-LM runs 1f1b and interleaved 1f1b schedules; this plan uses zb-h1 with 1 chunk "
        "per rank");
  CHECK(m.nearest.rfind("the same stages under 1f1b: --tensor-model-parallel-size 4 ", 0) == 0);

  Plan mixed = megatronLike(2, {2, 4});
  mixed.stages[1].costs.recompute = "selective";
  PlanExport r = megatronFlags(mixed);
  CHECK(r.whyNot ==
        "stage 1 recomputes selective but stage 0 none; Megatron-LM recomputes every stage alike");
  CHECK(r.nearest.find("recompute selective") != std::string::npos);
  CHECK(r.nearest.find("--recompute-granularity selective") != std::string::npos);

  PlanExport ds = deepspeedConfig(megatronLike(2, {2, 4}));
  CHECK(ds.whyNot ==
        "stage 0 splits parameters over 4 devices (mesh (2, 4): data x tensor+sequence); "
        "DeepSpeed's config has no tensor or expert parallelism");
  CHECK(ds.nearest.rfind("2 pipeline stages under 1f1b, each stage's 8 devices data-parallel", 0) ==
        0);
  CHECK(ds.nearest.find("\"train_micro_batch_size_per_gpu\": 1") != std::string::npos);
}

TEST_CASE("a DeepSpeed config and PyTorch's pipelining", "[plan][export]") {
  Plan p = megatronLike(2, {8, 1});
  for (PlanStage& s : p.stages) {
    s.strategies[1].outputs = {"RR"};  // weights replicated: data parallelism only
    s.costs.shardedOptimizerState = true;
  }
  PlanExport ds = deepspeedConfig(p);
  REQUIRE(ds.ok());
  CHECK(ds.text ==
        "{\n"
        "  \"train_batch_size\": 64,\n"
        "  \"train_micro_batch_size_per_gpu\": 1,\n"
        "  \"gradient_accumulation_steps\": 8,\n"
        "  \"zero_optimization\": {\n    \"stage\": 2\n  },\n"
        "  \"bf16\": {\n    \"enabled\": true\n  },\n"
        "  \"pipeline\": {\n    \"stages\": 2,\n    \"partition\": \"uniform\",\n    "
        "\"activation_checkpoint_interval\": 0\n  }\n"
        "}");

  PlanExport torch = pytorchPipeline(p);
  REQUIRE(torch.ok());
  CHECK(torch.text ==
        "from torch.distributed.pipelining import SplitPoint, Schedule1F1B\n"
        "split_spec = {\"block2\": SplitPoint.BEGINNING}\n"
        "n_microbatches = 8\n"
        "schedule_class = Schedule1F1B  # stages per rank: 1\n"
        "# stage 0: layers [0, 2), devices 0-7, mesh (8, 1): data\n"
        "# stage 1: layers [2, 4), devices 8-15, mesh (8, 1): data");

  Plan zb = p;
  zb.schedule = ScheduleKind::kZeroBubbleH1;
  PlanExport z = pytorchPipeline(zb);
  CHECK(z.whyNot == "torch.distributed.pipelining has no zb-h1 schedule with 1 chunk per rank");
  CHECK(z.nearest.find("schedule_class = Schedule1F1B") != std::string::npos);
}

TEST_CASE("a plan file round-trips with its cluster and alternatives", "[plan][file]") {
  PlanFile file{"gpt", p3_16xlarge(2), megatronLike(2, {2, 4})};
  file.cluster.device.fusedKernels = true;
  file.plan.description = "1f1b, 8 microbatches of 8, 2 stages: 2x (1, 8) as 2x4";
  auto alternative = std::make_shared<Plan>(megatronLike(2, {8, 1}));
  alternative->simulatedStepTime = 0.25;
  file.plan.alternatives = {{"the other one", 0.21, alternative}};
  nlohmann::json j = planFileToJson(file);
  CHECK(j["version"] == kPlanFileVersion);
  PlanFile back = planFileFromJson(nlohmann::json::parse(j.dump()));
  CHECK(back.model == "gpt");
  CHECK(back.plan == file.plan);
  CHECK(back.cluster.nodes == 2);
  CHECK(back.cluster.interNode.bandwidth == file.cluster.interNode.bandwidth);
  CHECK(back.cluster.device.fusedKernels);
  // A file written before the device had the field reads as unfused.
  j["cluster"]["device"].erase("fused_kernels");
  CHECK_FALSE(planFileFromJson(j).cluster.device.fusedKernels);
  REQUIRE(back.plan.alternatives[0].plan);
  CHECK(back.plan.alternatives[0].plan->simulatedStepTime == 0.25);
}

// Found by fuzz_plan: recompute_s beside "recompute": "none" was read, then left
// out of the save, so a loaded plan did not save back to itself.
TEST_CASE("recomputation costs without recomputation are not read", "[plan][file]") {
  nlohmann::json j = planFileToJson({"gpt", p3_16xlarge(2), megatronLike(2, {2, 4})});
  auto& costs = j["plan"]["stages"][0]["costs"];
  costs["recompute"] = "none";
  costs["recompute_s"] = 0.5;
  costs["recompute_bytes"] = 1024.0;
  const PlanFile file = planFileFromJson(j);
  CHECK(file.plan.stages[0].costs.recomputeSeconds == 0);
  CHECK(file.plan.stages[0].costs.recomputeBytes == 0);
  CHECK(planFileFromJson(nlohmann::json::parse(planFileToJson(file).dump())).plan == file.plan);
  costs["recompute"] = "full";
  CHECK(planFileFromJson(j).plan.stages[0].costs.recomputeSeconds == 0.5);
}

TEST_CASE("a corrupt or wrong-version plan file names the field", "[plan][file]") {
  nlohmann::json good = planFileToJson({"gpt", p3_16xlarge(2), megatronLike(2, {2, 4})});
  auto broken = [&](auto edit) {
    nlohmann::json j = good;
    edit(j);
    return j;
  };
  CHECK_THROWS_WITH(planFileFromJson(broken([](auto& j) { j["version"] = 1; })),
                    "version: version 1 is not one this meshflow reads (it reads version 2); save "
                    "the plan again with this meshflow");
  CHECK_THROWS_WITH(planFileFromJson(broken([](auto& j) { j.erase("format"); })),
                    Catch::StartsWith("plan: not a saved plan"));
  // The bare plan JSON (what `meshflow plan --json` wrote before it wrote plan
  // files) is named as such, with where the loadable file comes from.
  CHECK_THROWS_WITH(planFileFromJson(good["plan"]),
                    Catch::StartsWith("plan: a plan's JSON alone, without the model and cluster") &&
                        Catch::Contains("`meshflow plan --json`"));
  CHECK_THROWS_WITH(
      planFileFromJson(broken([](auto& j) { j["cluster"]["device"]["memory_bytes"] = "80GB"; })),
      "cluster.device.memory_bytes: expected a number");
  CHECK_THROWS_WITH(planFileFromJson(broken([](auto& j) { j["plan"]["stages"][1]["submesh"] = {0, 8}; })),
                    "plan.stages[1].submesh: expected positive [n, m]");
  // Numbers past what the plan keeps are errors, not overflowed or cut to 32 bits.
  CHECK_THROWS_WITH(planFileFromJson(broken([](auto& j) {
                      j["plan"]["stages"][1]["submesh"] = {std::int64_t{1} << 62, 2};
                    })),
                    "plan.stages[1].submesh: expected at most 16777216 devices a side");
  CHECK_THROWS_WITH(planFileFromJson(broken([](auto& j) { j["plan"]["microbatches"] = 4294967297; })),
                    "plan.microbatches: 4294967297 does not fit in 32 bits");
  // (fuzz_plan: nodes of 2^63 - 1 overflowed the device count.)
  CHECK_THROWS_WITH(planFileFromJson(broken([](auto& j) { j["cluster"]["nodes"] = INT64_MAX; })),
                    Catch::StartsWith("cluster.nodes: 9223372036854775807 nodes of") &&
                        Catch::EndsWith("devices are more than the 2147483647 devices a plan can number"));
  CHECK_THROWS_WITH(planFileFromJson(broken([](auto& j) { j["plan"]["stages"][1]["devices"][0] = 99; })),
                    "plan.stages[1].devices[0]: device 99 is not in the cluster's 16 devices");
  CHECK_THROWS_WITH(planFileFromJson(broken([](auto& j) { j["plan"]["model"]["precision"] = "fp8"; })),
                    "plan.model.precision: expected \"fp32\", \"fp16\" or \"bf16\"");
  // Alternatives nest one level only.
  nlohmann::json nested = good;
  nlohmann::json inner = good["plan"];
  inner["alternatives"] = nlohmann::json::array({{{"description", "d"}, {"step_time_s", 1.0}}});
  nested["plan"]["alternatives"] =
      nlohmann::json::array({{{"description", "x"}, {"step_time_s", 1.0}, {"plan", inner}}});
  CHECK_THROWS_WITH(planFileFromJson(nested),
                    "plan.alternatives[0].plan.alternatives: an alternative's plan has no "
                    "alternatives of its own");
}

TEST_CASE("a mutated plan file parses or is a PlanError, never another failure", "[plan][file]") {
  PlanFile file{"gpt", p3_16xlarge(2), megatronLike(2, {2, 4})};
  file.plan.alternatives = {{"other", 0.3, std::make_shared<Plan>(megatronLike(2, {8, 1}))}};
  const nlohmann::json good = planFileToJson(file);
  const nlohmann::json flat = good.flatten();
  std::vector<std::string> paths;
  for (auto it = flat.begin(); it != flat.end(); ++it) paths.push_back(it.key());
  const std::vector<nlohmann::json> replacements = {
      nullptr, -1, 0, 1e300, "S9", nlohmann::json::array(), nlohmann::json::object(), true, 7};
  std::mt19937 rng(18);
  int refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    nlohmann::json mutated = good;
    for (int edit = 0; edit < 1 + int(rng() % 3); ++edit) {
      const std::string& path = paths[rng() % paths.size()];
      mutated[nlohmann::json::json_pointer(path)] = replacements[rng() % replacements.size()];
    }
    try {
      planFileFromJson(mutated);
    } catch (const PlanError&) {
      ++refused;
    }
  }
  CHECK(refused > 200);  // most edits break something the parser checks
}

}  // namespace
}  // namespace meshflow::ir
