#include "passes/PlanPipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "ir/PipelineSchedule.h"
#include "passes/Lowering.h"

namespace meshflow::passes {
namespace {

int64_t bytes(double value) { return static_cast<int64_t>(std::llround(value)); }

// The virtual stages of each rank, in chunk order, as the schedule places them.
std::vector<std::vector<int>> stagesOfRanks(const ir::Plan& plan) {
  const int count = static_cast<int>(plan.stages.size());
  if (count == 0) throw LoweringError("the plan has no stages");
  if (plan.chunks < 1 || count % plan.chunks != 0) {
    throw LoweringError(fmt::format("the plan's {} stages do not divide into {} chunks per rank",
                                    count, plan.chunks));
  }
  ir::PipelineSchedule layout;
  layout.kind = plan.schedule;
  layout.stages = count / plan.chunks;
  layout.chunks = plan.chunks;
  std::vector<std::vector<int>> ranks(static_cast<size_t>(layout.stages));
  for (int chunk = 0; chunk < plan.chunks; ++chunk) {
    for (int rank = 0; rank < layout.stages; ++rank)
      ranks[static_cast<size_t>(rank)].push_back(layout.virtualStage(rank, chunk));
  }
  return ranks;
}

// Every chunk of a rank runs on the rank's devices, viewed the same way.
const ir::PlanStage& rankLayout(const ir::Plan& plan, const std::vector<int>& stages, int rank) {
  const ir::PlanStage& first = plan.stages[static_cast<size_t>(stages[0])];
  for (int s : stages) {
    const ir::PlanStage& stage = plan.stages[static_cast<size_t>(s)];
    if (stage.devices != first.devices || stage.logicalMesh != first.logicalMesh) {
      throw LoweringError(
          fmt::format("stages {} and {} both run on rank {} but on different "
                      "devices or logical meshes",
                      stages[0], s, rank));
    }
  }
  const auto [a, b] = first.logicalMesh;
  if (a < 1 || b < 1 || a * b != static_cast<int64_t>(first.devices.size())) {
    throw LoweringError(fmt::format("stage {}: logical mesh ({}, {}) does not view its {} devices",
                                    stages[0], a, b, first.devices.size()));
  }
  return first;
}

// Mesh dimension 0 is the data axis: replica i holds devices[i·b, (i+1)·b).
std::vector<std::vector<int>> replicaMeshes(const ir::PlanStage& stage, bool splitReplicas) {
  if (!splitReplicas) return {stage.devices};
  const auto [a, b] = stage.logicalMesh;
  std::vector<std::vector<int>> meshes;
  for (int64_t i = 0; i < a; ++i) {
    meshes.emplace_back(stage.devices.begin() + i * b, stage.devices.begin() + (i + 1) * b);
  }
  return meshes;
}

// The gradient sums inside one mesh of `layout`'s rank: with replicas over mesh
// dimension 0 (`splitReplicas`), the row's (1, b) mesh sums what the
// strategies leave partial over dimension 1 (dimension 0's share goes with
// the replicas' buckets); a rank that is one replica of its whole (a, b) mesh
// sums over columns, rows, or all of it.
std::vector<MeshGradientSync> meshSyncs(const ir::Plan& plan, const std::vector<int>& stages,
                                        const ir::PlanStage& layout, bool splitReplicas) {
  std::array<double, 3> partial{};
  for (int s : stages)
    for (std::size_t a = 0; a < partial.size(); ++a)
      partial[a] += plan.stages[static_cast<size_t>(s)].costs.gradientSyncBytes.value_or(
          std::array<double, 3>{})[a];
  const auto [rows, columns] = layout.logicalMesh;
  std::vector<MeshGradientSync> out;
  auto add = [&](double b, int64_t stride, int64_t members) {
    if (b > 0 && members > 1)
      out.push_back({bytes(b), static_cast<int>(stride), static_cast<int>(members)});
  };
  if (splitReplicas) {
    add(partial[1] + partial[2], 1, columns);
  } else {
    add(partial[0], columns, rows);
    add(partial[1], 1, columns);
    add(partial[2], 1, rows * columns);
  }
  return out;
}

StageDescription rankCosts(const ir::Plan& plan, const std::vector<int>& stages) {
  StageDescription rank;
  rank.forwardSeconds = rank.backwardSeconds = rank.weightGradSeconds = 0;
  for (int s : stages) {
    const ir::StageCosts& c = plan.stages[static_cast<size_t>(s)].costs;
    rank.forwardSeconds += c.forwardSeconds;
    rank.backwardSeconds += c.backwardSeconds;
    rank.weightGradSeconds += c.weightGradSeconds;
    rank.updateSeconds += c.updateSeconds;
    rank.activationBytes = std::max(rank.activationBytes, bytes(c.activationBytes));
    rank.heldActivationBytes += bytes(c.heldActivationBytes);
    rank.parameterBytes += bytes(c.parameterBytes);
    rank.gradientBytes += bytes(c.gradientBytes);
    rank.recomputeSeconds += c.recomputeSeconds;
    rank.recomputeBytes += bytes(c.recomputeBytes);
  }
  const std::string& recompute = plan.stages[static_cast<size_t>(stages[0])].costs.recompute;
  for (int s : stages) {
    if (plan.stages[static_cast<size_t>(s)].costs.recompute != recompute)
      throw LoweringError(fmt::format("stages {} and {} share a pipeline rank but recompute differently "
                                      "(\"{}\" and \"{}\")",
                                      stages[0], s, recompute, plan.stages[static_cast<size_t>(s)].costs.recompute));
  }
  rank.recompute = recompute != "none";
  // A sharded stage's gradientBytes is its shard; the backward makes the whole.
  for (int s : stages)
    rank.shardOptimizer = rank.shardOptimizer || plan.stages[static_cast<size_t>(s)].costs.shardedOptimizerState;
  return rank;
}

}  // namespace

bool sameDataParallelRows(const ir::Plan& plan) {
  return std::all_of(plan.stages.begin(), plan.stages.end(), [&](const ir::PlanStage& stage) {
    return stage.logicalMesh[0] == plan.stages.front().logicalMesh[0];
  });
}

PipelineDescription describePipeline(const ir::Plan& plan, std::vector<std::string>* notes) {
  const std::vector<std::vector<int>> ranks = stagesOfRanks(plan);
  std::vector<const ir::PlanStage*> layouts;
  for (size_t r = 0; r < ranks.size(); ++r)
    layouts.push_back(&rankLayout(plan, ranks[r], static_cast<int>(r)));
  const bool sameReplicas = sameDataParallelRows(plan);
  if (!sameReplicas && notes) {
    std::string meshes;
    for (size_t r = 0; r < layouts.size(); ++r) {
      meshes += fmt::format("{}({}, {})", r ? ", " : "", layouts[r]->logicalMesh[0],
                            layouts[r]->logicalMesh[1]);
    }
    notes->push_back(fmt::format(
        "the pipeline ranks have different data-parallel degrees (logical meshes {}); the "
        "simulation runs each rank as one replica of its whole submesh, its gradients summed "
        "inside that mesh",
        meshes));
  }

  PipelineDescription description;
  description.schedule = std::string(ir::scheduleKindName(plan.schedule));
  description.microbatches = plan.microbatches;
  description.chunks = plan.chunks;
  for (size_t r = 0; r < ranks.size(); ++r) {
    StageDescription rank = rankCosts(plan, ranks[r]);
    rank.meshes = replicaMeshes(*layouts[r], sameReplicas);
    rank.meshSyncs = meshSyncs(plan, ranks[r], *layouts[r], sameReplicas);
    if (rank.shardOptimizer) rank.gradientBytes *= static_cast<int64_t>(rank.meshes.size());
    rank.shardOptimizer = rank.shardOptimizer && rank.meshes.size() > 1;
    description.stages.push_back(std::move(rank));
  }
  return description;
}

runtime::sim::SimulatorOptions simulatorOptions(const ir::Cluster& cluster) {
  auto link = [](const ir::LinkSpec& spec, double share) {
    runtime::sim::Link out;
    out.latency = spec.latency;
    if (spec.bandwidth > 0) out.bandwidth = spec.bandwidth / share;
    return out;
  };
  runtime::sim::SimulatorOptions options;
  options.devicesPerNode = static_cast<int>(std::max<int64_t>(1, cluster.devicesPerNode));
  options.intraNode = link(cluster.intraNode, 1);
  options.interNode = link(cluster.interNode, static_cast<double>(options.devicesPerNode));
  options.hostCores = static_cast<int>(cluster.hostCores);
  return options;
}

}  // namespace meshflow::passes
