#include <catch2/catch.hpp>

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
