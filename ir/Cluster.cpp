#include "ir/Cluster.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/Counted.h"

namespace meshflow::ir {

namespace {

// Whether the groups along `dim` span nodes, and how many of them leave node 0
// (they share its network interface; every node looks the same). Devices are
// numbered row-major in the view and node k holds [k·perNode, (k+1)·perNode);
// each group's members are in ascending order, so a group spans nodes exactly
// when its first and last members do. O(rows + columns), not O(devices²): a
// submesh of 100,000 devices is priced in microseconds.
struct Crossing {
  bool spansNodes = false;
  std::int64_t groupsPerNode = 1;
};

Crossing crossingOf(int dim, std::array<std::int64_t, 2> view, std::int64_t perNode) {
  const auto [rows, columns] = view;
  const std::int64_t firstNode = std::min(perNode, rows * columns);  // node 0's devices
  Crossing c;
  if (dim == 1) {  // row r: devices [r·columns, (r + 1)·columns)
    for (std::int64_t r = 0; r < rows && !c.spansNodes; ++r)
      c.spansNodes = r * columns / perNode != (r * columns + columns - 1) / perNode;
    c.groupsPerNode = (firstNode - 1) / columns + 1;
  } else {  // column k: devices k, k + columns, … k + (rows − 1)·columns
    for (std::int64_t k = 0; k < columns && !c.spansNodes; ++k)
      c.spansNodes = k / perNode != (k + (rows - 1) * columns) / perNode;
    c.groupsPerNode = std::min(firstNode, columns);
  }
  return c;
}

}  // namespace

LogicalMesh logicalMesh(const Cluster& cluster, std::array<std::int64_t, 2> submesh,
                        std::array<std::int64_t, 2> view) {
  if (submesh[0] < 1 || submesh[1] < 1 || submesh[0] > cluster.nodes ||
      submesh[1] > cluster.devicesPerNode) {
    throw ClusterError(fmt::format("submesh ({}, {}) does not fit a cluster of {} x {}", submesh[0],
                                   submesh[1], counted(cluster.nodes, "node"),
                                   counted(cluster.devicesPerNode, "device")));
  }
  if (view[0] < 1 || view[1] < 1 || view[0] * view[1] != submesh[0] * submesh[1]) {
    throw ClusterError(fmt::format("logical mesh ({}, {}) does not have the {} of submesh ({}, {})",
                                   view[0], view[1], counted(submesh[0] * submesh[1], "device"),
                                   submesh[0], submesh[1]));
  }
  // A submesh of several nodes uses whole nodes, so node boundaries fall every
  // submesh[1] devices.
  std::int64_t perNode = submesh[1];
  LogicalMesh mesh;
  mesh.shape = view;
  for (int dim = 0; dim < 2; ++dim) {
    Crossing c = crossingOf(dim, view, perNode);
    const LinkSpec& link = c.spansNodes ? cluster.interNode : cluster.intraNode;
    double bandwidth = c.spansNodes ? link.bandwidth / double(c.groupsPerNode) : link.bandwidth;
    mesh.alpha[dim] = link.latency;
    mesh.beta[dim] = bandwidth > 0 ? 1.0 / bandwidth : 0.0;
  }
  return mesh;
}

std::vector<std::array<std::int64_t, 2>> logicalViews(std::int64_t devices) {
  std::vector<std::array<std::int64_t, 2>> views;
  for (std::int64_t a = 1; a <= devices; ++a) {
    if (devices % a == 0) views.push_back({a, devices / a});
  }
  return views;
}

Cluster p3_16xlarge(std::int64_t nodes) {
  Cluster c;
  c.nodes = nodes;
  c.devicesPerNode = 8;
  c.device = {"V100-SXM2-16GB", 16e9, 125e12, 900e9};
  c.intraNode = {150e9, 5e-6};
  c.interNode = {25e9 / 8.0, 25e-6};
  return c;
}

}  // namespace meshflow::ir
