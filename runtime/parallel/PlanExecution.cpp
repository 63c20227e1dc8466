#include "runtime/parallel/PlanExecution.h"

#include <fmt/format.h>

#include "passes/PlanPipeline.h"
#include "passes/Planner.h"

namespace meshflow::runtime {

namespace {

// A mesh-dimension set seen from a (1, b) group of one row: dimension 0 is
// the replicas', so only dimension 1 is left.
ir::MeshAxes onColumns(ir::MeshAxes axes) { return ir::hasAxis(axes, 1) ? ir::MeshAxes::k1 : ir::MeshAxes::kNone; }

ir::ShardingSpec onColumns(const std::string& text) {
  ir::ShardingSpec spec = ir::ShardingSpec::parse(text);
  std::vector<ir::MeshAxes> dims;
  for (ir::MeshAxes a : spec.dims()) dims.push_back(onColumns(a));
  return ir::ShardingSpec::fromDims(dims, onColumns(spec.partial()));
}

}  // namespace

std::map<ir::OpId, PlannedSpecs> tensorParallelStrategies(const ir::Graph& forward, const ir::Plan& plan) {
  std::map<ir::OpId, PlannedSpecs> out;
  for (const ir::PlanStage& stage : plan.stages)
    for (const ir::OpStrategy& s : stage.strategies) {
      if (s.op >= forward.ops().size() || s.kind != ir::opName(forward.op(s.op).kind))
        throw ParallelRunError(fmt::format("the plan does not fit the model: its op {} is a {}, the model's is {}",
                                           s.op, s.kind,
                                           s.op < forward.ops().size() ? ir::opName(forward.op(s.op).kind) : "missing"));
      PlannedSpecs specs;
      try {
        for (const std::string& t : s.inputs) specs.inputs.push_back(onColumns(t));
        for (const std::string& t : s.outputs) specs.outputs.push_back(onColumns(t));
      } catch (const ir::ShardingParseError& e) {
        throw ParallelRunError(fmt::format("the plan's strategy of op {} (`{}`): {}", s.op, s.scope, e.what()));
      }
      out[s.op] = std::move(specs);
    }
  return out;
}

ParallelPlan parallelPlanOf(const ir::Graph& forward, const ir::Plan& plan) {
  const int ranks = plan.pipelineRanks();
  if (plan.stages.empty() || ranks < 1) throw ParallelRunError("the plan has no stages");
  const auto& first = plan.stages[0].logicalMesh;
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& mesh = plan.stages[s].logicalMesh;
    if (mesh != first)
      throw ParallelRunError(fmt::format(
          "stage {} runs on a ({}, {}) logical mesh and stage 0 on ({}, {}); the cpu runtime needs the same "
          "data-parallel rows and tensor-parallel columns on every stage",
          s, mesh[0], mesh[1], first[0], first[1]));
  }
  passes::PipelineDescription description = passes::describePipeline(plan);
  ParallelPlan p;
  try {
    p.stageOfForwardOp = passes::stageOfForwardOps(forward, plan);
  } catch (const passes::PlanningError& e) {
    throw ParallelRunError(fmt::format("the plan does not fit the model: {}", e.what()));
  }
  p.virtualStages = static_cast<int>(plan.stages.size());
  p.rankDevices.clear();
  for (int r = 0; r < ranks; ++r) p.rankDevices.push_back(plan.stages[static_cast<std::size_t>(r)].devices);
  p.tensorParallel = static_cast<int>(first[1]);
  if (p.tensorParallel > 1) p.strategies = tensorParallelStrategies(forward, plan);
  p.schedule = description.schedule;
  p.microbatches = description.microbatches;
  p.groupSize = description.groupSize;
  p.costs = description.stages;
  return p;
}

std::string parallelPlanText(const ParallelPlan& plan, std::int64_t batch) {
  const std::size_t ranks = plan.rankDevices.size();
  const std::size_t perRank = plan.rankDevices.empty() ? 0 : plan.rankDevices[0].size();
  const std::size_t t = static_cast<std::size_t>(std::max(1, plan.tensorParallel));
  const std::size_t replicas = perRank / t;
  std::string chunks = static_cast<std::size_t>(plan.virtualStages) > ranks
                           ? fmt::format(" ({} virtual)", plan.virtualStages)
                           : "";
  std::string tensor = t > 1 ? fmt::format(" × {} tensor-parallel", t) : "";
  return fmt::format("{} stage{}{} × {} replica{}{}, {}, {} microbatch{} of {}, {} devices", ranks,
                     ranks == 1 ? "" : "s", chunks, replicas, replicas == 1 ? "" : "s", tensor, plan.schedule,
                     plan.microbatches, plan.microbatches == 1 ? "" : "es",
                     batch / std::max<std::int64_t>(1, plan.microbatches * static_cast<std::int64_t>(replicas)),
                     ranks * perRank);
}

}  // namespace meshflow::runtime
