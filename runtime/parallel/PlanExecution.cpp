#include "runtime/parallel/PlanExecution.h"

#include <fmt/format.h>

#include "passes/PlanPipeline.h"
#include "passes/Planner.h"

namespace meshflow::runtime {

ParallelPlan parallelPlanOf(const ir::Graph& forward, const ir::Plan& plan) {
  const int ranks = plan.pipelineRanks();
  if (plan.stages.empty() || ranks < 1) throw ParallelRunError("the plan has no stages");
  const std::int64_t replicas = plan.stages[0].logicalMesh[0];
  for (std::size_t s = 0; s < plan.stages.size(); ++s) {
    const auto& mesh = plan.stages[s].logicalMesh;
    if (mesh[1] != 1)
      throw ParallelRunError(fmt::format(
          "stage {} shards its ops over a ({}, {}) logical mesh; the cpu runtime runs pipeline and "
          "data parallelism only (logical meshes (a, 1)) for now: plan with max_tensor_parallel = 1",
          s, mesh[0], mesh[1]));
    if (mesh[0] != replicas)
      throw ParallelRunError(fmt::format("stage {} has {} data-parallel replicas and stage 0 has {}; the "
                                         "cpu runtime needs the same number on every stage",
                                         s, mesh[0], replicas));
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
  p.schedule = description.schedule;
  p.microbatches = description.microbatches;
  p.groupSize = description.groupSize;
  p.costs = description.stages;
  return p;
}

std::string parallelPlanText(const ParallelPlan& plan, std::int64_t batch) {
  const std::size_t ranks = plan.rankDevices.size();
  const std::size_t replicas = plan.rankDevices.empty() ? 0 : plan.rankDevices[0].size();
  std::string chunks = static_cast<std::size_t>(plan.virtualStages) > ranks
                           ? fmt::format(" ({} virtual)", plan.virtualStages)
                           : "";
  return fmt::format("{} stage{}{} × {} replica{}, {}, {} microbatch{} of {}, {} devices", ranks,
                     ranks == 1 ? "" : "s", chunks, replicas, replicas == 1 ? "" : "s", plan.schedule,
                     plan.microbatches, plan.microbatches == 1 ? "" : "es",
                     batch / std::max<std::int64_t>(1, plan.microbatches * static_cast<std::int64_t>(replicas)),
                     ranks * replicas);
}

}  // namespace meshflow::runtime
