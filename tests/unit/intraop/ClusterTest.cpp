#include <catch2/catch.hpp>

#include <set>

#include "ir/Cluster.h"

using namespace meshflow;

TEST_CASE("logical meshes take α and β from the links their dimensions cross") {
  ir::Cluster c = ir::p3_16xlarge(2);
  // One node viewed as (1, 8) or (2, 4): every group stays on NVLink.
  ir::LogicalMesh one = ir::logicalMesh(c, {1, 8}, {2, 4});
  CHECK(one.shape == std::array<std::int64_t, 2>{2, 4});
  CHECK(one.beta[0] == Approx(1 / 150e9));
  CHECK(one.beta[1] == Approx(1 / 150e9));
  CHECK(one.alpha[0] == Approx(5e-6));
  // Two nodes as (2, 8): dimension 0 crosses the network, and the 8 groups of a
  // node share its 25 Gb/s; dimension 1 stays inside a node.
  ir::LogicalMesh two = ir::logicalMesh(c, {2, 8}, {2, 8});
  CHECK(two.beta[0] == Approx(8 / (25e9 / 8)));
  CHECK(two.alpha[0] == Approx(25e-6));
  CHECK(two.beta[1] == Approx(1 / 150e9));
  // As (1, 16) the one ring spans both nodes and has the interface to itself.
  ir::LogicalMesh flat = ir::logicalMesh(c, {2, 8}, {1, 16});
  CHECK(flat.beta[1] == Approx(1 / (25e9 / 8)));
  // As (4, 4) rows of 4 stay inside a node; columns span nodes (4 per node).
  ir::LogicalMesh square = ir::logicalMesh(c, {2, 8}, {4, 4});
  CHECK(square.beta[1] == Approx(1 / 150e9));
  CHECK(square.beta[0] == Approx(4 / (25e9 / 8)));
}

TEST_CASE("invalid submeshes and views are errors") {
  ir::Cluster c = ir::p3_16xlarge(1);
  CHECK_THROWS_AS(ir::logicalMesh(c, {2, 8}, {2, 8}), ir::ClusterError);
  CHECK_THROWS_AS(ir::logicalMesh(c, {1, 8}, {3, 3}), ir::ClusterError);
  CHECK(ir::logicalViews(8) == std::vector<std::array<std::int64_t, 2>>{{1, 8}, {2, 4}, {4, 2}, {8, 1}});
}

namespace {

// The links of a view by brute force over every pair of devices (the
// definition crossingOf's closed form must meet): a dimension crosses the
// network when two devices of one group sit in different nodes; the groups
// met among node 0's devices share its interface.
std::array<double, 2> bruteForceBeta(const ir::Cluster& c, std::array<std::int64_t, 2> submesh,
                                     std::array<std::int64_t, 2> view) {
  std::array<double, 2> beta{};
  const std::int64_t devices = view[0] * view[1], perNode = submesh[1];
  for (int dim = 0; dim < 2; ++dim) {
    auto groupOf = [&](std::int64_t d) { return dim == 0 ? d % view[1] : d / view[1]; };
    bool spans = false;
    for (std::int64_t d = 0; d < devices; ++d)
      for (std::int64_t e = d + 1; e < devices; ++e)
        spans = spans || (groupOf(d) == groupOf(e) && d / perNode != e / perNode);
    std::set<std::int64_t> groups;
    for (std::int64_t d = 0; d < std::min(perNode, devices); ++d) groups.insert(groupOf(d));
    beta[dim] = spans ? double(groups.size()) / c.interNode.bandwidth : 1 / c.intraNode.bandwidth;
  }
  return beta;
}

}  // namespace

TEST_CASE("a view's links match the brute-force definition on every small submesh") {
  for (std::int64_t perNode : {1, 2, 4, 6, 8}) {
    ir::Cluster c = ir::p3_16xlarge(6);
    c.devicesPerNode = perNode;
    for (std::int64_t nodes = 1; nodes <= 6; ++nodes)
      for (std::int64_t m = 1; m <= perNode; ++m) {
        if (nodes > 1 && m != perNode) continue;  // several nodes: whole nodes only
        for (auto view : ir::logicalViews(nodes * m)) {
          INFO("submesh (" << nodes << ", " << m << ") of " << perNode << " per node, view (" << view[0]
                           << ", " << view[1] << ")");
          ir::LogicalMesh mesh = ir::logicalMesh(c, {nodes, m}, view);
          auto beta = bruteForceBeta(c, {nodes, m}, view);
          CHECK(mesh.beta[0] == Approx(beta[0]));
          CHECK(mesh.beta[1] == Approx(beta[1]));
        }
      }
  }
}

TEST_CASE("views of a 100,000-device submesh are priced without a pass over device pairs") {
  // 12,500 DGX nodes: the old pairwise loop took minutes per view
  // (issue 18); the closed form is O(rows + columns).
  ir::Cluster c = ir::p3_16xlarge(12500);
  int views = 0;
  for (auto view : ir::logicalViews(100000)) {
    ir::LogicalMesh mesh = ir::logicalMesh(c, {12500, 8}, view);
    CHECK(mesh.beta[0] > 0);
    ++views;
  }
  CHECK(views == 36);
  ir::LogicalMesh rows = ir::logicalMesh(c, {12500, 8}, {12500, 8});
  CHECK(rows.beta[1] == Approx(1 / c.intraNode.bandwidth));
  CHECK(rows.beta[0] == Approx(8 / c.interNode.bandwidth));
}
