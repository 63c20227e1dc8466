// The exports of ir/Plan.h for frameworks that take a pipeline and data
// parallelism as configuration: DeepSpeed's config JSON and PyTorch's
// pipelining (docs/planning.md, "Exports").
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "ir/Plan.h"
#include "ir/PlanAxes.h"

namespace meshflow::ir {
namespace {

// Whether the plan's stages split by transformer blocks (the embedding and
// head riding along), which DeepSpeed's "type:transformer" partition does.
bool byBlocks(const Plan& plan) { return plan.model.blocks > 0 && blocksOf(plan.stages[0]) > 0; }

bool evenLayers(const Plan& plan) {
  const PlanStage& first = plan.stages[0];
  for (const PlanStage& s : plan.stages) {
    if (byBlocks(plan) ? blocksOf(s) != blocksOf(first)
                       : s.endLayer - s.firstLayer != first.endLayer - first.firstLayer)
      return false;
  }
  return true;
}

// ---- DeepSpeed ----

// Why DeepSpeed's config cannot say what the plan does, or "".
std::string deepspeedProblem(const Plan& plan) {
  const PlanStage& first = plan.stages[0];
  if (plan.schedule != ScheduleKind::kOneFOneB || plan.chunks != 1)
    return fmt::format("DeepSpeed's pipeline engine runs 1f1b with one stage per rank; this plan "
                       "uses {} with {} chunk{} per rank",
                       scheduleKindName(plan.schedule), plan.chunks, plan.chunks == 1 ? "" : "s");
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const PlanStage& s = plan.stages[i];
    std::array<AxisRoles, 2> roles = axisRoles(s);
    if (std::int64_t tp = degreeOf(roles, &AxisRoles::tensor) * degreeOf(roles, &AxisRoles::expert);
        tp > 1)
      return fmt::format("stage {} splits parameters over {} devices (mesh {}: {}); DeepSpeed's "
                         "config has no tensor or expert parallelism",
                         i, tp, fmt::format("({}, {})", s.logicalMesh[0], s.logicalMesh[1]),
                         axesText(s));
    if (s.submesh[0] * s.submesh[1] != first.submesh[0] * first.submesh[1])
      return fmt::format("stage {} runs on {} devices but stage 0 on {}; DeepSpeed gives every "
                         "stage the same data parallelism",
                         i, s.submesh[0] * s.submesh[1], first.submesh[0] * first.submesh[1]);
    if (s.costs.recompute != first.costs.recompute || s.costs.recompute == "selective")
      return fmt::format("stage {} recomputes {} (stage 0: {}); DeepSpeed's pipeline checkpoints "
                         "every stage's layers alike and only whole",
                         i, s.costs.recompute, first.costs.recompute);
    if (s.costs.shardedOptimizerState != first.costs.shardedOptimizerState)
      return fmt::format("stage {} {} its optimizer state but stage 0 does{}; DeepSpeed's ZeRO "
                         "stage holds for every stage",
                         i, s.costs.shardedOptimizerState ? "shards" : "does not shard",
                         first.costs.shardedOptimizerState ? "" : " not");
  }
  if (!evenLayers(plan))
    return "the stages hold unequal layer counts; DeepSpeed's config partitions only by a method "
           "(uniform, parameters), not at given layers";
  return "";
}

std::string deepspeedText(const Plan& plan) {
  const PlanStage& first = plan.stages[0];
  const std::int64_t replicas = first.submesh[0] * first.submesh[1];
  nlohmann::ordered_json config;
  config["train_batch_size"] = plan.globalBatch;
  const std::int64_t perReplica = replicas * plan.microbatches;
  if (plan.globalBatch % perReplica == 0)
    config["train_micro_batch_size_per_gpu"] = plan.globalBatch / perReplica;
  config["gradient_accumulation_steps"] = plan.microbatches;
  // meshflow's sharded variant shards gradients and optimizer state: ZeRO stage 2.
  config["zero_optimization"] = {{"stage", first.costs.shardedOptimizerState && replicas > 1 ? 2 : 0}};
  if (plan.model.precision == "fp16") config["fp16"] = {{"enabled", true}};
  if (plan.model.precision == "bf16") config["bf16"] = {{"enabled", true}};
  config["pipeline"] = {{"stages", plan.pipelineRanks()},
                        {"partition", byBlocks(plan) ? "type:transformer" : "uniform"},
                        {"activation_checkpoint_interval", first.costs.recompute == "full" ? 1 : 0}};
  return config.dump(2);
}

// A stage's attention ops only: its blocks without its layouts, which
// axisRoles then reads by the mesh's convention.
std::vector<OpStrategy> blockMarkers(const PlanStage& stage) {
  std::vector<OpStrategy> out;
  for (const OpStrategy& op : stage.strategies)
    if (op.kind == "split_heads") out.push_back(op);
  return out;
}

// "each stage's 8 devices data-parallel", "one device per stage".
std::string replicas(std::int64_t devices) {
  return devices == 1 ? "one device per stage"
                      : fmt::format("each stage's {} devices data-parallel", devices);
}

// The nearest plan DeepSpeed's config expresses: 1f1b, every stage's devices
// as data-parallel replicas, recomputation whole (full) where any stage
// recomputes, the optimizer sharded where any stage shards it, the layers
// split uniformly. Nothing when the stages' device counts differ.
std::optional<std::pair<std::string, Plan>> deepspeedNearest(const Plan& plan) {
  Plan near = plan;
  near.schedule = ScheduleKind::kOneFOneB;
  near.chunks = 1;
  near.stages.resize(static_cast<std::size_t>(plan.pipelineRanks()));
  std::string recompute = "none";
  bool sharded = false;
  for (const PlanStage& s : plan.stages) {
    if (s.submesh[0] * s.submesh[1] != near.stages[0].submesh[0] * near.stages[0].submesh[1])
      return std::nullopt;
    if (s.costs.recompute != "none") recompute = "full";
    sharded = sharded || s.costs.shardedOptimizerState;
  }
  if (!spanLayersLikeFirstStage(near.stages)) return std::nullopt;
  for (PlanStage& s : near.stages) {
    s.logicalMesh = {s.submesh[0] * s.submesh[1], 1};
    s.costs.recompute = recompute;
    s.costs.shardedOptimizerState = sharded;
    // As many blocks as stage 0, and no layouts: every device a replica.
    s.strategies = blockMarkers(near.stages[0]);
  }
  return std::make_pair(
      fmt::format("{} pipeline stage{} under 1f1b, {}, layers split uniformly, recompute {}{}",
                  near.stages.size(), near.stages.size() == 1 ? "" : "s",
                  replicas(near.stages[0].submesh[0] * near.stages[0].submesh[1]), recompute,
                  sharded ? ", ZeRO stage 2" : ""),
      near);
}

// ---- PyTorch ----

const char* pytorchSchedule(const Plan& plan) {
  switch (plan.schedule) {
    case ScheduleKind::kGPipe:
      return plan.chunks == 1 ? "ScheduleGPipe" : nullptr;
    case ScheduleKind::kOneFOneB:
      return plan.chunks == 1 ? "Schedule1F1B" : nullptr;
    case ScheduleKind::kInterleaved:
      return plan.chunks > 1 ? "ScheduleInterleaved1F1B" : nullptr;
    case ScheduleKind::kZeroBubbleV:
      return plan.chunks == 2 ? "ScheduleZBVZeroBubble" : nullptr;
    default:
      return nullptr;
  }
}

// The top-level scope where a stage starts (`block4`), or "" when its ops
// carry none.
std::string firstScope(const PlanStage& stage) {
  for (const OpStrategy& op : stage.strategies)
    if (!op.scope.empty()) return op.scope.substr(0, op.scope.find('.'));
  return "";
}

std::string pytorchText(const Plan& plan, const char* schedule) {
  std::string split;
  for (std::size_t k = 1; k < plan.stages.size(); ++k) {
    std::string scope = firstScope(plan.stages[k]);
    split += fmt::format("{}\"{}\": SplitPoint.BEGINNING", split.empty() ? "" : ", ",
                         scope.empty() ? fmt::format("<layer {}>", plan.stages[k].firstLayer)
                                       : scope);
  }
  std::string out = fmt::format(
      "from torch.distributed.pipelining import SplitPoint, {}\n"
      "split_spec = {{{}}}\n"
      "n_microbatches = {}\n"
      "schedule_class = {}  # stages per rank: {}\n",
      schedule, split, plan.microbatches, schedule, plan.chunks);
  for (std::size_t k = 0; k < plan.stages.size(); ++k) {
    const PlanStage& s = plan.stages[k];
    out += fmt::format("# stage {}: layers [{}, {}), devices {}, mesh ({}, {}): {}{}\n", k,
                       s.firstLayer, s.endLayer, s.devices.empty() ? "-" : idRanges(s.devices, ","),
                       s.logicalMesh[0], s.logicalMesh[1], axesText(s),
                       s.costs.recompute == "none" ? "" : ", recompute " + s.costs.recompute);
  }
  out.pop_back();
  return out;
}

}  // namespace

PlanExport deepspeedConfig(const Plan& plan) {
  if (plan.stages.empty()) return {"", "the plan has no stages", ""};
  std::string why = deepspeedProblem(plan);
  if (why.empty()) return {deepspeedText(plan), "", ""};
  auto near = deepspeedNearest(plan);
  if (near && !deepspeedProblem(near->second).empty()) near.reset();
  return {"", why, near ? near->first + ":\n" + deepspeedText(near->second) : ""};
}

PlanExport pytorchPipeline(const Plan& plan) {
  if (plan.stages.empty()) return {"", "the plan has no stages", ""};
  if (const char* schedule = pytorchSchedule(plan)) return {pytorchText(plan, schedule), "", ""};
  Plan near = plan;
  near.schedule = plan.chunks > 1 ? ScheduleKind::kInterleaved : ScheduleKind::kOneFOneB;
  return {"",
          fmt::format("torch.distributed.pipelining has no {} schedule with {} chunk{} per rank",
                      scheduleKindName(plan.schedule), plan.chunks, plan.chunks == 1 ? "" : "s"),
          fmt::format("the same stages under {}:\n{}", scheduleKindName(near.schedule),
                      pytorchText(near, pytorchSchedule(near)))};
}

}  // namespace meshflow::ir
