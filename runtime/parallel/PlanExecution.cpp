#include "runtime/parallel/PlanExecution.h"

#include <fmt/format.h>

#include "ir/PlanAxes.h"
#include "passes/PlanPipeline.h"
#include "passes/Planner.h"

namespace meshflow::runtime {

namespace {

// A mesh-dimension set seen from a (1, b) group of one row: dimension 0 is
// the replicas', so only dimension 1 is left.
ir::MeshAxes onColumns(ir::MeshAxes axes) { return ir::hasAxis(axes, 1) ? ir::MeshAxes::k1 : ir::MeshAxes::kNone; }

ir::ShardingSpec onColumns(const ir::ShardingSpec& spec) {
  std::vector<ir::MeshAxes> dims;
  for (ir::MeshAxes a : spec.dims()) dims.push_back(onColumns(a));
  return ir::ShardingSpec::fromDims(dims, onColumns(spec.partial()));
}

// The specs of the strategy `s` (inputs, then outputs), parsed; throws
// ParallelRunError when it does not fit `forward`.
PlannedSpecs parsedSpecs(const ir::Graph& forward, const ir::OpStrategy& s) {
  if (s.op >= forward.ops().size() || s.kind != ir::opName(forward.op(s.op).kind))
    throw ParallelRunError(fmt::format("the plan does not fit the model: its op {} is a {}, the model's is {}", s.op,
                                       s.kind, s.op < forward.ops().size() ? ir::opName(forward.op(s.op).kind) : "missing"));
  PlannedSpecs specs;
  try {
    for (const std::string& t : s.inputs) specs.inputs.push_back(ir::ShardingSpec::parse(t));
    for (const std::string& t : s.outputs) specs.outputs.push_back(ir::ShardingSpec::parse(t));
  } catch (const ir::ShardingParseError& e) {
    throw ParallelRunError(fmt::format("the plan's strategy of op {} (`{}`): {}", s.op, s.scope, e.what()));
  }
  return specs;
}

}  // namespace

std::map<ir::OpId, PlannedSpecs> plannedStrategies(const ir::Graph& forward, const ir::Plan& plan, bool columns) {
  std::map<ir::OpId, PlannedSpecs> out;
  for (const ir::PlanStage& stage : plan.stages)
    for (const ir::OpStrategy& s : stage.strategies) {
      PlannedSpecs specs = parsedSpecs(forward, s);
      if (columns) {
        for (auto& spec : specs.inputs) spec = onColumns(spec);
        for (auto& spec : specs.outputs) spec = onColumns(spec);
      }
      out[s.op] = std::move(specs);
    }
  return out;
}

ParallelPlan parallelPlanOf(const ir::Graph& forward, const ir::Plan& plan) {
  const int ranks = plan.pipelineRanks();
  if (plan.stages.empty() || ranks < 1) throw ParallelRunError("the plan has no stages");
  passes::PipelineDescription description = passes::describePipeline(plan);
  ParallelPlan p;
  try {
    p.stageOfForwardOp = passes::stageOfForwardOps(forward, plan);
    p.layerOfForwardOp = passes::layerOfForwardOps(forward, plan);
  } catch (const passes::PlanningError& e) {
    throw ParallelRunError(fmt::format("the plan does not fit the model: {}", e.what()));
  }
  const bool rows = passes::sameDataParallelRows(plan);
  p.virtualStages = static_cast<int>(plan.stages.size());
  p.rankDevices.clear();
  bool spmd = false;
  for (int r = 0; r < ranks; ++r) {
    const ir::PlanStage& stage = plan.stages[static_cast<std::size_t>(r)];
    p.rankDevices.push_back(stage.devices);
    p.rankMeshes.push_back(rows ? std::array<std::int64_t, 2>{1, stage.logicalMesh[1]} : stage.logicalMesh);
    spmd = spmd || p.meshSize(r) > 1;
  }
  if (spmd) p.strategies = plannedStrategies(forward, plan, rows);
  p.schedule = description.schedule;
  p.microbatches = description.microbatches;
  p.groupSize = description.groupSize;
  p.costs = description.stages;
  for (const passes::StageDescription& rank : description.stages) p.shardOptimizer.push_back(rank.shardOptimizer);
  for (const ir::PlanStage& stage : plan.stages) {
    auto mode = passes::parseRecompute(stage.costs.recompute);
    if (!mode) throw ParallelRunError(fmt::format("the plan's recompute \"{}\" is not none, selective or full",
                                                  stage.costs.recompute));
    p.recompute.push_back(*mode);
  }
  return p;
}

namespace {

// What axis 1 of every stage's mesh carries: "tensor" by convention, else
// what the planned strategies do with it when all stages agree.
std::string secondAxisText(const ir::Plan* planned) {
  if (!planned || planned->stages.empty()) return "tensor";
  std::string text = ir::axisRoles(planned->stages[0])[1].text();
  for (const ir::PlanStage& stage : planned->stages)
    if (ir::axisRoles(stage)[1].text() != text) return "tensor";
  return text;
}

// "", " × 2 tensor-parallel", " × 2 data-parallel", " on (2, 2) meshes" or
// " on meshes (1, 2), (2, 2)".
std::string meshText(const ParallelPlan& plan, const ir::Plan* planned) {
  const int ranks = static_cast<int>(plan.rankDevices.size());
  auto [a, b] = plan.meshOf(0);
  if (plan.sameMeshes() && a == 1) {
    if (b == 1) return "";
    std::string carries = secondAxisText(planned);
    return carries == "replicated" ? fmt::format(" × {} replicated", b)
                                   : fmt::format(" × {} {}-parallel", b, carries);
  }
  if (plan.sameMeshes()) return fmt::format(" on ({}, {}) meshes", a, b);
  std::string text = " on meshes ";
  for (int r = 0; r < ranks; ++r) text += fmt::format("{}({}, {})", r ? ", " : "", plan.meshOf(r)[0], plan.meshOf(r)[1]);
  return text;
}

}  // namespace

std::string parallelPlanText(const ParallelPlan& plan, std::int64_t batch, const ir::Plan* planned) {
  const std::size_t ranks = plan.rankDevices.size();
  const std::size_t replicas = static_cast<std::size_t>(plan.replicas());
  std::size_t devices = 0;
  for (const auto& rank : plan.rankDevices) devices += rank.size();
  std::string chunks = static_cast<std::size_t>(plan.virtualStages) > ranks
                           ? fmt::format(" ({} virtual)", plan.virtualStages)
                           : "";
  bool sharded = false;
  for (std::size_t r = 0; r < ranks; ++r)
    sharded = sharded || (plan.shardsOptimizer(static_cast<int>(r)) && replicas > 1);
  return fmt::format("{} stage{}{} × {} replica{}{}{}, {}, {} microbatch{} of {}, {} device{}", ranks,
                     ranks == 1 ? "" : "s", chunks, replicas, replicas == 1 ? "" : "s", meshText(plan, planned),
                     sharded ? " (sharded optimizer)" : "", plan.schedule,
                     plan.microbatches, plan.microbatches == 1 ? "" : "es",
                     batch / std::max<std::int64_t>(1, plan.microbatches * static_cast<std::int64_t>(replicas)),
                     devices, devices == 1 ? "" : "s");
}

}  // namespace meshflow::runtime
