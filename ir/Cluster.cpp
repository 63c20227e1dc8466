#include "ir/Cluster.h"

#include <fmt/format.h>

#include <set>

namespace meshflow::ir {

namespace {

// The groups of mesh dimension `dim`: for each device, the index of its group
// (the devices sharing every other mesh coordinate).
std::int64_t groupOf(std::int64_t device, int dim, std::array<std::int64_t, 2> view) {
  std::int64_t row = device / view[1], col = device % view[1];
  return dim == 0 ? col : row;
}

// Whether the groups along `dim` span nodes, and how many of them leave node 0
// (they share its network interface; every node looks the same).
struct Crossing {
  bool spansNodes = false;
  std::int64_t groupsPerNode = 1;
};

Crossing crossingOf(int dim, std::array<std::int64_t, 2> view, std::int64_t perNode) {
  Crossing c;
  std::int64_t devices = view[0] * view[1];
  for (std::int64_t d = 0; d < devices && !c.spansNodes; ++d) {
    for (std::int64_t e = d + 1; e < devices; ++e) {
      if (groupOf(d, dim, view) == groupOf(e, dim, view) && d / perNode != e / perNode) {
        c.spansNodes = true;
        break;
      }
    }
  }
  std::set<std::int64_t> groups;
  for (std::int64_t d = 0; d < std::min(perNode, devices); ++d) groups.insert(groupOf(d, dim, view));
  c.groupsPerNode = static_cast<std::int64_t>(groups.size());
  return c;
}

}  // namespace

LogicalMesh logicalMesh(const Cluster& cluster, std::array<std::int64_t, 2> submesh,
                        std::array<std::int64_t, 2> view) {
  if (submesh[0] < 1 || submesh[1] < 1 || submesh[0] > cluster.nodes ||
      submesh[1] > cluster.devicesPerNode) {
    throw ClusterError(fmt::format("submesh ({}, {}) does not fit a cluster of {} nodes x {} devices",
                                   submesh[0], submesh[1], cluster.nodes, cluster.devicesPerNode));
  }
  if (view[0] < 1 || view[1] < 1 || view[0] * view[1] != submesh[0] * submesh[1]) {
    throw ClusterError(fmt::format("logical mesh ({}, {}) does not have the {} devices of submesh ({}, {})",
                                   view[0], view[1], submesh[0] * submesh[1], submesh[0], submesh[1]));
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
