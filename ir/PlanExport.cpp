// The exports of ir/Plan.h: a plan in the notations of Megatron-LM, JAX and Alpa.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/Plan.h"

namespace meshflow::ir {
namespace {

std::string meshText(const std::array<std::int64_t, 2>& mesh) {
  return fmt::format("({}, {})", mesh[0], mesh[1]);
}

// Why Megatron-LM cannot express the plan's pipeline, or "" when it can.
std::string megatronScheduleProblem(const Plan& plan) {
  if (plan.schedule == ScheduleKind::kOneFOneB && plan.chunks == 1) return "";
  if (plan.schedule == ScheduleKind::kInterleaved && plan.chunks > 1) return "";
  return fmt::format(
      "Megatron-LM runs 1f1b and interleaved 1f1b schedules; this plan uses {} "
      "with {} chunk{} per rank",
      scheduleKindName(plan.schedule), plan.chunks, plan.chunks == 1 ? "" : "s");
}

// Why the stages differ in a way Megatron's flags cannot say, or "".
std::string megatronUniformityProblem(const Plan& plan) {
  const PlanStage& first = plan.stages[0];
  int layers = first.endLayer - first.firstLayer;
  for (std::size_t i = 1; i < plan.stages.size(); ++i) {
    const PlanStage& s = plan.stages[i];
    if (s.logicalMesh != first.logicalMesh)
      return fmt::format(
          "stage {} uses logical mesh {} but stage 0 uses {}; Megatron-LM gives "
          "every stage the same tensor and data parallelism",
          i, meshText(s.logicalMesh), meshText(first.logicalMesh));
    if (s.endLayer - s.firstLayer != layers)
      return fmt::format(
          "stage {} holds {} layers but stage 0 holds {}; Megatron-LM splits the "
          "layers evenly",
          i, s.endLayer - s.firstLayer, layers);
  }
  return "";
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
  if (plan.stages.empty()) return {"", "the plan has no stages"};
  if (std::string why = megatronScheduleProblem(plan); !why.empty()) return {"", why};
  if (std::string why = megatronUniformityProblem(plan); !why.empty()) return {"", why};
  const PlanStage& first = plan.stages[0];
  // Mesh dimension 1 runs over consecutive devices, like Megatron's tensor group.
  std::int64_t tp = first.logicalMesh[1], dp = first.logicalMesh[0];
  std::string flags =
      fmt::format("--tensor-model-parallel-size {} --pipeline-model-parallel-size {}", tp,
                  plan.pipelineRanks());
  if (plan.chunks > 1)
    flags += fmt::format(" --num-layers-per-virtual-pipeline-stage {}",
                         first.endLayer - first.firstLayer);
  std::int64_t perMicrobatch = dp * plan.microbatches;
  if (plan.globalBatch > 0 && plan.globalBatch % perMicrobatch == 0)
    flags += fmt::format(" --global-batch-size {} --micro-batch-size {}", plan.globalBatch,
                         plan.globalBatch / perMicrobatch);
  return {flags, ""};
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

}  // namespace meshflow::ir
