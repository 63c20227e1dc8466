#include "passes/planner/MeshConfigs.h"

#include <fmt/format.h>

namespace meshflow::passes {

std::string MeshConfig::text() const {
  return fmt::format("({}, {}) as {}x{}", shape.nodes, shape.devicesPerNode, view[0], view[1]);
}

std::vector<SubmeshShape> submeshShapes(const ir::Cluster& cluster, bool subNodeShapes) {
  int nodes = static_cast<int>(cluster.nodes);
  int perNode = static_cast<int>(cluster.devicesPerNode);
  std::vector<SubmeshShape> shapes;
  // Sub-node sizes must divide one another for the DP to count devices
  // (passes/StageSolver.h): keep the chain 1, 2, 4, … of divisors of M.
  if (subNodeShapes)
    for (int m = 1; m < perNode; m *= 2)
      if (perNode % m == 0) shapes.push_back({1, m});
  for (int n = 1; n <= nodes; ++n) shapes.push_back({n, perNode});
  return shapes;
}

std::vector<MeshConfig> meshConfigs(const ir::Cluster& cluster, const MeshConfigLimits& limits) {
  std::int64_t maxTp = limits.maxTensorParallel.value_or(cluster.devicesPerNode);
  std::vector<MeshConfig> configs;
  bool subNode = limits.subNodeShapes && !limits.uniformOnly;
  for (SubmeshShape shape : submeshShapes(cluster, subNode)) {
    if (limits.uniformOnly && cluster.nodes % shape.nodes != 0) continue;
    if (limits.stageDevices && shape.devices() != *limits.stageDevices) continue;
    for (auto view : ir::logicalViews(shape.devices())) {
      if (view[1] > maxTp) continue;
      if (limits.dataParallel && view[0] != *limits.dataParallel) continue;
      MeshConfig c{shape, view, ir::logicalMesh(cluster, {shape.nodes, shape.devicesPerNode}, view)};
      configs.push_back(c);
    }
  }
  return configs;
}

}  // namespace meshflow::passes
