// The exports of ir/Plan.h: a plan in the notations of Megatron-LM, JAX and Alpa.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "ir/Plan.h"
#include "ir/PlanAxes.h"

namespace meshflow::ir {
namespace {

std::string meshText(const std::array<std::int64_t, 2>& mesh) {
  return fmt::format("({}, {})", mesh[0], mesh[1]);
}

// Why Megatron-LM cannot run the plan's pipeline, or "" when it can.
std::string megatronScheduleProblem(const Plan& plan) {
  if (plan.schedule == ScheduleKind::kOneFOneB && plan.chunks == 1) return "";
  if (plan.schedule == ScheduleKind::kInterleaved && plan.chunks > 1) return "";
  return fmt::format(
      "Megatron-LM runs 1f1b and interleaved 1f1b schedules; this plan uses {} "
      "with {} chunk{} per rank",
      scheduleKindName(plan.schedule), plan.chunks, plan.chunks == 1 ? "" : "s");
}

// What Megatron splits evenly: transformer blocks where the plan's ops show
// them (the embedding and head ride along with the first and last), else
// the planner's layers.
int megatronLayers(const Plan& plan, const PlanStage& stage) {
  if (plan.model.blocks > 0 && blocksOf(plan.stages[0]) > 0) return blocksOf(stage);
  return stage.endLayer - stage.firstLayer;
}

// Why the stages differ in a way Megatron's flags cannot say, or "".
std::string megatronUniformityProblem(const Plan& plan) {
  const PlanStage& first = plan.stages[0];
  int layers = megatronLayers(plan, first);
  for (std::size_t i = 1; i < plan.stages.size(); ++i) {
    const PlanStage& s = plan.stages[i];
    if (s.logicalMesh != first.logicalMesh)
      return fmt::format(
          "stage {} uses logical mesh {} but stage 0 uses {}; Megatron-LM gives "
          "every stage the same tensor and data parallelism",
          i, meshText(s.logicalMesh), meshText(first.logicalMesh));
    if (megatronLayers(plan, s) != layers)
      return fmt::format(
          "stage {} holds {} {} but stage 0 holds {}; Megatron-LM splits the "
          "layers evenly",
          i, megatronLayers(plan, s), blocksOf(first) > 0 && plan.model.blocks > 0 ? "blocks" : "layers",
          layers);
    if (s.costs.recompute != first.costs.recompute)
      return fmt::format(
          "stage {} recomputes {} but stage 0 {}; Megatron-LM recomputes every stage alike", i,
          s.costs.recompute, first.costs.recompute);
    if (s.costs.shardedOptimizerState != first.costs.shardedOptimizerState)
      return fmt::format(
          "stage {} {} its optimizer state but stage 0 {}; Megatron-LM's distributed optimizer "
          "is on for every stage or none",
          i, s.costs.shardedOptimizerState ? "shards" : "does not shard",
          first.costs.shardedOptimizerState ? "does" : "does not");
  }
  return "";
}

// Why Megatron's groups cannot hold what the mesh axes carry, or "".
std::string megatronAxesProblem(const Plan& plan) {
  std::array<AxisRoles, 2> roles = axisRoles(plan.stages[0]);
  for (int a = 0; a < 2; ++a) {
    const AxisRoles& axis = roles[static_cast<std::size_t>(a)];
    if (axis.size > 1 && axis.data && (axis.tensor || axis.expert))
      return fmt::format(
          "mesh axis {} carries {}; Megatron-LM's data and model-parallel groups are disjoint", a,
          axis.text());
  }
  if (roles[0].size > 1 && (roles[0].tensor || roles[0].expert) && roles[1].size > 1)
    return fmt::format(
        "the model-parallel axis is mesh axis 0 ({}), strided over the devices; Megatron-LM's "
        "tensor group is consecutive devices",
        roles[0].text());
  for (const AxisRoles& axis : roles)
    if (axis.size > 1 && axis.sequence && !axis.tensor)
      return fmt::format(
          "an axis of {} devices carries {}: sequence parallelism without tensor parallelism is "
          "context parallelism, which these flags do not set",
          axis.size, axis.text());
  return "";
}

std::string megatronProblem(const Plan& plan) {
  if (std::string why = megatronScheduleProblem(plan); !why.empty()) return why;
  const std::int64_t stages = static_cast<std::int64_t>(plan.stages.size());
  if (plan.model.blocks > 0 && plan.model.blocks % stages != 0)
    return fmt::format("the model's {} transformer blocks do not split evenly over {} stages, as "
                       "Megatron-LM's --num-layers must",
                       plan.model.blocks, stages);
  if (std::string why = megatronUniformityProblem(plan); !why.empty()) return why;
  return megatronAxesProblem(plan);
}

// The flags of a plan Megatron-LM can express.
std::string megatronText(const Plan& plan) {
  const PlanStage& first = plan.stages[0];
  std::array<AxisRoles, 2> roles = axisRoles(first);
  std::int64_t tp = degreeOf(roles, &AxisRoles::tensor);
  std::int64_t ep = degreeOf(roles, &AxisRoles::expert);
  // The axes that carry no model parallelism (megatronAxesProblem: data
  // never shares one with it). Not the mesh over tp × ep: one axis may carry
  // both (the fuzzer's plan of a (1, 2) mesh made that 2 / 4 = 0 replicas,
  // and the batch flags divided by it).
  std::int64_t dp = 1;
  for (const AxisRoles& axis : roles)
    if (!axis.tensor && !axis.expert) dp *= axis.size;
  std::string flags =
      fmt::format("--tensor-model-parallel-size {} --pipeline-model-parallel-size {}", tp,
                  plan.pipelineRanks());
  if (ep > 1) flags += fmt::format(" --expert-model-parallel-size {}", ep);
  if (plan.chunks > 1)
    flags += fmt::format(" --num-layers-per-virtual-pipeline-stage {}", megatronLayers(plan, first));
  const ModelFacts& m = plan.model;
  if (m.blocks > 0) flags += fmt::format(" --num-layers {}", m.blocks);
  if (m.hidden > 0) flags += fmt::format(" --hidden-size {}", m.hidden);
  if (m.heads > 0) flags += fmt::format(" --num-attention-heads {}", m.heads);
  if (m.sequence > 0) flags += fmt::format(" --seq-length {}", m.sequence);
  std::int64_t perMicrobatch = dp * plan.microbatches;
  if (plan.globalBatch > 0 && plan.globalBatch % perMicrobatch == 0)
    flags += fmt::format(" --global-batch-size {} --micro-batch-size {}", plan.globalBatch,
                         plan.globalBatch / perMicrobatch);
  if (tp > 1 && (roles[1].sequence || roles[0].sequence)) flags += " --sequence-parallel";
  if (first.costs.recompute == "full")
    flags += " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1";
  if (first.costs.recompute == "selective") flags += " --recompute-granularity selective";
  if (first.costs.shardedOptimizerState && dp > 1) flags += " --use-distributed-optimizer";
  if (m.precision == "fp16") flags += " --fp16";
  if (m.precision == "bf16") flags += " --bf16";
  return flags;
}

// The nearest plan Megatron-LM can express: its schedule, every stage like
// stage 0 (layers split evenly), recomputation and the distributed optimizer
// as the most any stage uses, the model axis as consecutive devices. Nothing
// when the stages' device counts differ (no even pipeline keeps them).
std::optional<std::pair<std::string, Plan>> megatronNearest(const Plan& plan) {
  Plan near = plan;
  std::vector<std::string> changes;
  if (!megatronScheduleProblem(plan).empty()) {
    bool interleave = plan.chunks > 1 && plan.microbatches % plan.pipelineRanks() == 0;
    near.schedule = interleave ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
    if (!interleave) {
      near.chunks = 1;
      // The V's chunks of a rank become one stage per rank.
      near.stages.resize(static_cast<std::size_t>(plan.pipelineRanks()));
    }
    changes.push_back(fmt::format("the same stages under {}{}", scheduleKindName(near.schedule),
                                  interleave ? fmt::format(" with {} chunks", near.chunks) : ""));
  }
  const PlanStage& first = near.stages[0];
  std::string recompute = "none";
  bool sharded = false;
  for (const PlanStage& s : near.stages) {
    if (s.submesh[0] * s.submesh[1] != first.submesh[0] * first.submesh[1]) return std::nullopt;
    if (s.costs.recompute == "full" || (s.costs.recompute == "selective" && recompute == "none"))
      recompute = s.costs.recompute;
    sharded = sharded || s.costs.shardedOptimizerState;
  }
  std::string before = megatronUniformityProblem(near);
  if (!spanLayersLikeFirstStage(near.stages)) return std::nullopt;
  for (PlanStage& s : near.stages) {
    s.logicalMesh = first.logicalMesh;
    if (blocksOf(first) > 0) s.strategies = first.strategies;  // as many blocks as stage 0
    s.costs.recompute = recompute;
    s.costs.shardedOptimizerState = sharded;
  }
  if (!before.empty())
    changes.push_back(fmt::format("every stage on mesh {} with its layers split evenly, "
                                  "recompute {}{}",
                                  meshText(first.logicalMesh), recompute,
                                  sharded ? ", optimizer state sharded" : ""));
  if (!megatronAxesProblem(near).empty()) {
    for (PlanStage& s : near.stages)  // the mesh's convention, the blocks kept
      std::erase_if(s.strategies, [](const OpStrategy& op) { return op.kind != "split_heads"; });
    changes.push_back(
        fmt::format("mesh axis 1 ({} device{}) as the tensor group, axis 0 as data parallelism",
                    first.logicalMesh[1], first.logicalMesh[1] == 1 ? "" : "s"));
  }
  if (!megatronProblem(near).empty()) return std::nullopt;
  std::string what;
  for (const std::string& change : changes) what += (what.empty() ? "" : "; ") + change;
  return std::make_pair(what, near);
}

std::string jaxAxes(MeshAxes axes) {
  switch (axes) {
    case MeshAxes::kNone:
      return "None";
    case MeshAxes::k0:
      return "'data'";
    case MeshAxes::k1:
      return "'model'";
    case MeshAxes::k01:
      return "('data', 'model')";
  }
  return "None";
}

template <typename Format>
std::vector<SpecRow> specRows(const Plan& plan, Format format) {
  std::vector<SpecRow> rows;
  for (std::size_t s = 0; s < plan.stages.size(); ++s)
    for (const OpStrategy& op : plan.stages[s].strategies)
      for (std::size_t o = 0; o < op.outputs.size(); ++o) {
        SpecRow row{int(s), op.op, op.kind, op.scope, int(o), "", ""};
        format(ShardingSpec::parse(op.outputs[o]), row);
        rows.push_back(std::move(row));
      }
  return rows;
}

}  // namespace

PlanExport megatronFlags(const Plan& plan) {
  if (plan.stages.empty()) return {"", "the plan has no stages", ""};
  std::string why = megatronProblem(plan);
  if (why.empty()) return {megatronText(plan), "", ""};
  auto near = megatronNearest(plan);
  return {"", why, near ? near->first + ": " + megatronText(near->second) : ""};
}

std::string jaxPartitionSpec(const ShardingSpec& spec) {
  std::vector<std::string> dims;
  for (MeshAxes axes : spec.dims()) dims.push_back(jaxAxes(axes));
  return fmt::format("PartitionSpec({})", fmt::join(dims, ", "));
}

std::vector<SpecRow> jaxPartitionSpecs(const Plan& plan) {
  return specRows(plan, [](const ShardingSpec& spec, SpecRow& row) {
    row.spec = jaxPartitionSpec(spec);
    if (spec.partial() != MeshAxes::kNone)
      row.note =
          fmt::format("partial sum over {}: reduce (psum) before use", jaxAxes(spec.partial()));
  });
}

std::vector<SpecRow> alpaSpecs(const Plan& plan) {
  return specRows(plan, [](const ShardingSpec& spec, SpecRow& row) { row.spec = spec.toString(); });
}

bool spanLayersLikeFirstStage(std::vector<PlanStage>& stages) {
  if (stages.empty()) return true;
  const std::int64_t span = std::int64_t{stages[0].endLayer} - stages[0].firstLayer;
  for (const PlanStage& s : stages)
    if (s.firstLayer + span > std::numeric_limits<int>::max()) return false;
  for (PlanStage& s : stages) s.endLayer = static_cast<int>(s.firstLayer + span);
  return true;
}

}  // namespace meshflow::ir
