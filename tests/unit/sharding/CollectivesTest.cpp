#include <catch2/catch.hpp>
#include <cmath>
#include <vector>

#include "passes/Collectives.h"

using meshflow::ir::LogicalMesh;
using meshflow::ir::MeshAxes;
using meshflow::ir::ShardingSpec;
using meshflow::passes::Collective;
using meshflow::passes::collectiveCost;
using meshflow::passes::reshardingCost;

namespace {

// A (2,4) mesh whose dimension 0 is slow (across nodes) and dimension 1 fast.
LogicalMesh testMesh() {
  LogicalMesh m;
  m.shape = {2, 4};
  m.alpha = {1e-5, 1e-6};
  m.beta = {1e-9, 1e-10};
  return m;
}

double reshard(const char* from, const char* to, std::vector<int64_t> shape) {
  return reshardingCost(ShardingSpec::parse(from), ShardingSpec::parse(to), shape, 4.0, testMesh());
}

}  // namespace

TEST_CASE("collectives: alpha-beta formulas", "[sharding][collectives]") {
  LogicalMesh m = testMesh();
  double B = 1e6;
  CHECK(collectiveCost(Collective::kAllReduce, B, MeshAxes::k1, m) ==
        Approx(2.0 * 3 / 4 * B * 1e-10 + 2 * 3 * 1e-6));
  CHECK(collectiveCost(Collective::kAllGather, B, MeshAxes::k0, m) ==
        Approx(1.0 / 2 * B * 1e-9 + 1e-5));
  CHECK(collectiveCost(Collective::kReduceScatter, B, MeshAxes::k1, m) ==
        Approx(3.0 / 4 * B * 1e-10 + 3 * 1e-6));
  CHECK(collectiveCost(Collective::kAllToAll, B, MeshAxes::k1, m) ==
        Approx(3.0 / 16 * B * 2 * 1e-10 + 3 * 1e-6));
  CHECK(collectiveCost(Collective::kBroadcast, B, MeshAxes::k1, m) == Approx(B * 1e-10 + 3e-6));
  // Both dimensions: eight devices at the slower link's alpha and beta.
  CHECK(collectiveCost(Collective::kAllReduce, B, MeshAxes::k01, m) ==
        Approx(2.0 * 7 / 8 * B * 1e-9 + 2 * 7 * 1e-5));
  CHECK(collectiveCost(Collective::kAllReduce, B, MeshAxes::kNone, m) == 0.0);
  LogicalMesh flat;
  flat.shape = {1, 4};
  flat.alpha = {1.0, 1.0};
  CHECK(collectiveCost(Collective::kAllGather, B, MeshAxes::k0, flat) == 0.0);
}

TEST_CASE("resharding: free conversions", "[sharding][collectives]") {
  CHECK(reshard("S0R", "S0R", {8, 8}) == 0.0);
  CHECK(reshard("RR", "S0R", {8, 8}) == 0.0);
  CHECK(reshard("RR", "S01R", {8, 8}) == 0.0);
  CHECK(reshard("RS1", "S0S1", {8, 8}) == 0.0);
}

TEST_CASE("resharding: gathers, moves and reductions", "[sharding][collectives]") {
  LogicalMesh m = testMesh();
  std::vector<int64_t> shape{8, 16};
  double bytes = 8 * 16 * 4.0;
  auto cost = [&](Collective k, double b, MeshAxes a) { return collectiveCost(k, b, a, m); };

  CHECK(reshard("S0R", "RR", shape) == Approx(cost(Collective::kAllGather, bytes, MeshAxes::k0)));
  CHECK(reshard("RS1", "RR", shape) == Approx(cost(Collective::kAllGather, bytes, MeshAxes::k1)));
  // S01 → S0 gathers the minor dimension only, ending with half the tensor.
  CHECK(reshard("S01R", "S0R", shape) ==
        Approx(cost(Collective::kAllGather, bytes / 2, MeshAxes::k1)));
  // S01 → R gathers minor then major.
  CHECK(reshard("S01R", "RR", shape) ==
        Approx(cost(Collective::kAllGather, bytes / 2, MeshAxes::k1) +
               cost(Collective::kAllGather, bytes, MeshAxes::k0)));
  CHECK(reshard("S0R", "S01R", shape) == 0.0);
  // Moving a split to another tensor dimension is one all-to-all of the local tile.
  CHECK(reshard("S0R", "RS0", shape) ==
        Approx(cost(Collective::kAllToAll, bytes / 2, MeshAxes::k0)));
  CHECK(reshard("S0S1", "S1S0", shape) ==
        Approx(cost(Collective::kAllToAll, bytes / 8, MeshAxes::k0) +
               cost(Collective::kAllToAll, bytes / 8, MeshAxes::k1)));
  // Moving to another mesh dimension: gather the old split, slice the new one.
  CHECK(reshard("S0R", "S1R", shape) == Approx(cost(Collective::kAllGather, bytes, MeshAxes::k0)));
  // Partial sums: all-reduce into a replica, reduce-scatter into a split.
  CHECK(reshard("RR+P0", "RR", shape) == Approx(cost(Collective::kAllReduce, bytes, MeshAxes::k0)));
  CHECK(reshard("RR+P1", "RS1", shape) ==
        Approx(cost(Collective::kReduceScatter, bytes, MeshAxes::k1)));
  CHECK(reshard("RR+P1", "S0S1", shape) ==  // Slice first, then reduce-scatter half as much.
        Approx(cost(Collective::kReduceScatter, bytes / 2, MeshAxes::k1)));
  CHECK(reshard("S0R+P1", "S0R+P1", shape) == 0.0);
  CHECK(reshard("RR+P01", "RR", shape) ==
        Approx(cost(Collective::kAllReduce, bytes, MeshAxes::k0) +
               cost(Collective::kAllReduce, bytes, MeshAxes::k1)));
}

TEST_CASE("resharding: impossible conversions cost infinity", "[sharding][collectives]") {
  CHECK(std::isinf(reshard("RR", "RR+P0", {8, 8})));  // Resharding never creates a sum.
  CHECK(std::isinf(reshard("S0R", "RS0+P1", {8, 8})));
  CHECK(std::isinf(reshard("RR", "RS01", {8, 12})));  // 12 is not divisible by 8.
  CHECK(std::isinf(reshard("S0R", "S0S0", {8, 8})));  // Mesh dimension 0 twice.
  CHECK(std::isinf(reshard("S0R", "RR", {8})));       // Rank mismatch.
}
