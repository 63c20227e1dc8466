// Turns the planner's chosen candidate into an ir::Plan: stage ranges, meshes,
// placed device ids, per-op strategies with their alternatives, costs for the
// simulator and runtime, and the throughput figures.
#pragma once

#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "ir/Graph.h"
#include "ir/Plan.h"
#include "passes/LayerClustering.h"
#include "passes/planner/Candidate.h"
#include "passes/planner/LayerCosts.h"

namespace meshflow::passes {

struct PlanInputs {
  const ir::Graph* forward = nullptr;
  const ir::Cluster* cluster = nullptr;
  const LayerClustering* layers = nullptr;
  LayerCostTable* table = nullptr;
  const std::vector<MeshConfig>* configs = nullptr;
  std::int64_t globalBatch = 1;
  double memoryBudget = 0;
};

/// The plan of `best`, placed on `devices` (per stage, from passes/Placement).
ir::Plan buildPlan(const PlanInputs& in, const Candidate& best,
                   const std::vector<std::vector<int>>& devices);

}  // namespace meshflow::passes
