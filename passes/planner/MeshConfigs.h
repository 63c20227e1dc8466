// The (submesh shape, logical view) pairs a stage may run on, filtered by the
// schedule hints that constrain them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "ir/Sharding.h"
#include "passes/StageSolver.h"

namespace meshflow::passes {

struct MeshConfig {
  SubmeshShape shape;
  std::array<std::int64_t, 2> view{1, 1};  ///< (a, b): a data-parallel rows, b tensor-parallel
  ir::LogicalMesh mesh;

  std::string text() const;  ///< "(2, 8) as 4x4"
};

struct MeshConfigLimits {
  std::optional<int> maxTensorParallel;  ///< b ≤ this; default: devices per node
  std::optional<int> dataParallel;       ///< a = this
  std::optional<int> stageDevices;       ///< every stage this many devices (a `stages` hint)
  bool subNodeShapes = true;             ///< (1, m) shapes with m < M
  /// Only whole-node shapes (n, M) with n dividing N: the shapes of pipelines
  /// whose stages are all alike.
  bool uniformOnly = false;
};

/// Alpa's submesh shapes: (1, m) for m dividing M (powers of two first, as Alpa,
/// then the other divisors), and whole nodes (n, M) for every n ≤ N.
std::vector<SubmeshShape> submeshShapes(const ir::Cluster& cluster, bool subNodeShapes);

/// Every shape × view the limits allow, shapes in submeshShapes order, views
/// by ascending a.
std::vector<MeshConfig> meshConfigs(const ir::Cluster& cluster, const MeshConfigLimits& limits);

}  // namespace meshflow::passes
