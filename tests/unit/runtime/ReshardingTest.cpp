// Resharding on the cpu backend's devices: every conversion between random
// specs on several logical meshes (device ids shuffled) gives each device the
// box of the global tensor the target spec says, exactly — values are small
// integers, so partial sums add up without rounding. Device bodies only
// record; the checks run after LocalCluster::run has joined the threads.
#include <catch2/catch.hpp>
#include <numeric>
#include <random>

#include "../parallel/CountingCommunicator.h"
#include "runtime/cpu/LocalCluster.h"
#include "runtime/parallel/Resharding.h"

using meshflow::ir::MeshAxes;
using meshflow::ir::ShardingSpec;
using meshflow::runtime::MeshPlace;
using meshflow::runtime::reshard;
using meshflow::runtime::ReshardError;
using meshflow::runtime::Shape;
using meshflow::runtime::takeShard;
using meshflow::runtime::Tensor;
using meshflow::runtime::cpu::LocalCluster;

namespace {

constexpr MeshAxes kAxes[] = {MeshAxes::kNone, MeshAxes::k0, MeshAxes::k1, MeshAxes::k01};

// Every spec of `rank` dimensions that fits `global` on `mesh`.
std::vector<ShardingSpec> allSpecs(std::size_t rank, const Shape& global, const MeshPlace& mesh) {
  std::vector<ShardingSpec> out;
  std::size_t combos = 1;
  for (std::size_t d = 0; d <= rank; ++d) combos *= 4;
  for (std::size_t c = 0; c < combos; ++c) {
    std::vector<MeshAxes> dims;
    std::size_t code = c;
    for (std::size_t d = 0; d < rank; ++d, code /= 4) dims.push_back(kAxes[code % 4]);
    ShardingSpec spec = ShardingSpec::fromDims(dims, kAxes[code % 4]);
    if (!spec.validate(global, mesh.logical())) out.push_back(spec);
  }
  return out;
}

Tensor integers(const Shape& shape, std::mt19937& rng) {
  Tensor t = Tensor::zeros(shape);
  for (float& x : t.f32()) x = float(int(rng() % 19) - 9);
  return t;
}

Tensor plus(Tensor a, const Tensor& b) {
  for (std::size_t i = 0; i < a.f32().size(); ++i) a.f32()[i] += b.f32()[i];
  return a;
}

MeshPlace placeOn(std::array<std::int64_t, 2> shape, const std::vector<int>& devices, int index) {
  MeshPlace p;
  p.shape = shape;
  p.devices = devices;
  p.index = index;
  return p;
}

struct Case {
  std::array<std::int64_t, 2> mesh;
  Shape global;
};

}  // namespace

TEST_CASE("reshard gives every device its box under the target spec", "[runtime][resharding]") {
  const Case cases[] = {{{1, 1}, {6, 4}}, {{2, 1}, {12, 4}}, {{1, 2}, {4, 12}},   {{2, 2}, {12, 8}},
                        {{2, 3}, {12, 6}}, {{3, 2}, {6, 12, 4}}, {{1, 4}, {8, 4, 4}}, {{4, 1}, {8, 12}}};
  std::mt19937 rng(2026);
  int conversions = 0, withPartial = 0, toPartial = 0;
  for (const Case& c : cases) {
    const int n = int(c.mesh[0] * c.mesh[1]);
    std::vector<int> devices(static_cast<std::size_t>(n));
    std::iota(devices.begin(), devices.end(), 0);
    std::shuffle(devices.begin(), devices.end(), rng);
    MeshPlace any = placeOn(c.mesh, devices, 0);
    std::vector<ShardingSpec> specs = allSpecs(c.global.size(), c.global, any);
    LocalCluster cluster({n});
    for (int trial = 0; trial < 40; ++trial) {
      const ShardingSpec& from = specs[rng() % specs.size()];
      ShardingSpec to = specs[rng() % specs.size()];
      INFO("mesh (" << c.mesh[0] << ", " << c.mesh[1] << "): " << from.toString() << " -> " << to.toString());
      // The global tensor, and the terms of its partial sum over from.partial().
      Tensor global = integers(c.global, rng);
      std::int64_t termCount = any.logical().devices(from.partial());
      std::vector<Tensor> terms(std::size_t(termCount), global);
      for (std::int64_t t = 1; t < termCount; ++t) {
        terms[std::size_t(t)] = integers(c.global, rng);
        for (std::size_t i = 0; i < global.f32().size(); ++i) terms[0].f32()[i] -= terms[std::size_t(t)].f32()[i];
      }
      std::vector<Tensor> got(static_cast<std::size_t>(n));
      cluster.run([&](int device) {
        int index = int(std::find(devices.begin(), devices.end(), device) - devices.begin());
        MeshPlace place = placeOn(c.mesh, devices, index);
        Tensor local = takeShard(terms[std::size_t(place.pieceIndex(from.partial()))], from, place);
        got[std::size_t(index)] = reshard(local, c.global, from, to, place, cluster.communicator(device));
      });
      for (int index = 0; index < n; ++index) {
        MeshPlace place = placeOn(c.mesh, devices, index);
        // What the device must hold: the terms summed over the axes the target
        // no longer keeps partial, boxed under `to`; zeros off the first member
        // of a partial sum the target adds.
        MeshAxes summed = meshflow::ir::withoutAxes(from.partial(), to.partial());
        MeshAxes added = meshflow::ir::withoutAxes(to.partial(), from.partial());
        Tensor expected = Tensor::zeros(c.global);
        for (std::size_t m = 0; m < place.group(summed).size(); ++m)
          expected = plus(expected, terms[std::size_t(place.memberOf(summed, m).pieceIndex(from.partial()))]);
        if (place.pieceIndex(added) != 0) expected = Tensor::zeros(c.global);
        INFO("device index " << index);
        REQUIRE(got[std::size_t(index)].bitEqual(takeShard(expected, to, place)));
      }
      ++conversions;
      withPartial += from.partial() != MeshAxes::kNone ? 1 : 0;
      toPartial += to.partial() != MeshAxes::kNone ? 1 : 0;
    }
  }
  CHECK(conversions >= 250);
  CHECK(withPartial >= 80);
  CHECK(toPartial >= 80);
}

TEST_CASE("reshard moves i32 tensors too", "[runtime][resharding]") {
  std::vector<int> devices = {3, 1, 0, 2};
  Tensor ids = Tensor::fromI32({4, 8}, [] {
    std::vector<std::int32_t> v(32);
    std::iota(v.begin(), v.end(), 100);
    return v;
  }());
  ShardingSpec from = ShardingSpec::parse("S0S1"), to = ShardingSpec::parse("RS01");
  std::vector<Tensor> got(4);
  LocalCluster cluster({4});
  cluster.run([&](int device) {
    int index = int(std::find(devices.begin(), devices.end(), device) - devices.begin());
    MeshPlace place = placeOn({2, 2}, devices, index);
    got[std::size_t(index)] =
        reshard(takeShard(ids, from, place), ids.shape(), from, to, place, cluster.communicator(device));
  });
  for (int index = 0; index < 4; ++index)
    CHECK(got[std::size_t(index)].bitEqual(takeShard(ids, to, placeOn({2, 2}, devices, index))));
}

TEST_CASE("reshard refuses a spec or box that does not fit, before any communication", "[runtime][resharding]") {
  LocalCluster cluster({2});
  MeshPlace place = placeOn({1, 2}, {0, 1}, 0);
  Shape global{4, 6};
  Tensor local = Tensor::zeros({4, 3});
  auto& comm = cluster.communicator(0);
  CHECK_THROWS_WITH(reshard(local, global, ShardingSpec::parse("RR"), ShardingSpec::parse("RS1"), place, comm),
                    Catch::Contains("the local box is f32[4, 3] but spec RR"));
  CHECK_THROWS_AS(reshard(Tensor::zeros({4, 6}), Shape{4, 5}, ShardingSpec::parse("RR"),
                          ShardingSpec::parse("RS1"), place, comm),
                  ReshardError);
}

TEST_CASE("a device's box follows the spec's mesh order", "[runtime][resharding]") {
  // S01 splits over both mesh dimensions, dimension 0 major: (i, j) holds
  // piece i·b + j. S0 follows the row i, S1 the column j.
  Tensor v = Tensor::fromF32({8}, {0, 1, 2, 3, 4, 5, 6, 7});
  auto box = [&](const char* spec, int index) {
    Tensor t = takeShard(v, ShardingSpec::parse(spec), placeOn({2, 2}, {0, 1, 2, 3}, index));
    return std::vector<float>(t.f32().begin(), t.f32().end());
  };
  CHECK(box("S01", 1) == std::vector<float>{2, 3});
  CHECK(box("S01", 2) == std::vector<float>{4, 5});
  CHECK(box("S0", 1) == std::vector<float>{0, 1, 2, 3});
  CHECK(box("S0", 2) == std::vector<float>{4, 5, 6, 7});
  CHECK(box("S1", 1) == std::vector<float>{4, 5, 6, 7});
  CHECK(box("S1", 2) == std::vector<float>{0, 1, 2, 3});
  MeshPlace p = placeOn({2, 3}, {5, 4, 3, 2, 1, 0}, 4);  // (1, 1) holds device 1
  CHECK(p.group(MeshAxes::k0) == std::vector<int>{4, 1});
  CHECK(p.group(MeshAxes::k1) == std::vector<int>{2, 1, 0});
  CHECK(p.group(MeshAxes::k01) == std::vector<int>{5, 4, 3, 2, 1, 0});
  CHECK(p.group(MeshAxes::kNone) == std::vector<int>{1});
}

TEST_CASE("a split moved to another dimension is one all-to-all, not a gather",
          "[runtime][resharding]") {
  // The expert-parallel exchange of a mixture of experts: slots [E, B*C, h]
  // split over the groups (dim 1) become split over the experts (dim 0), and back.
  using meshflow::parallel_test::CollectiveCounts;
  using meshflow::parallel_test::CountingCommunicator;
  struct Move {
    std::array<std::int64_t, 2> mesh;
    ShardingSpec from, to;
  };
  const Shape global{4, 8, 6};
  const Move moves[] = {{{1, 2}, ShardingSpec::parse("RS1R"), ShardingSpec::parse("S1RR")},
                        {{2, 1}, ShardingSpec::parse("S0RR"), ShardingSpec::parse("RS0R")},
                        {{2, 2}, ShardingSpec::parse("RS01R"), ShardingSpec::parse("S01RR")},
                        {{2, 2}, ShardingSpec::parse("RS0S1"), ShardingSpec::parse("S0RS1")},
                        {{1, 4}, ShardingSpec::parse("S1RR"), ShardingSpec::parse("RS1R")}};
  std::mt19937 rng(7);
  for (const Move& m : moves) {
    const int n = int(m.mesh[0] * m.mesh[1]);
    std::vector<int> devices(static_cast<std::size_t>(n));
    std::iota(devices.begin(), devices.end(), 0);
    std::shuffle(devices.begin(), devices.end(), rng);
    Tensor whole = integers(global, rng);
    LocalCluster cluster({n});
    CollectiveCounts counts;
    std::vector<Tensor> got(static_cast<std::size_t>(n));
    cluster.run([&](int device) {
      int index = int(std::find(devices.begin(), devices.end(), device) - devices.begin());
      MeshPlace place = placeOn(m.mesh, devices, index);
      CountingCommunicator comm(cluster.communicator(device), counts);
      got[std::size_t(index)] =
          reshard(takeShard(whole, m.from, place), global, m.from, m.to, place, comm);
    });
    INFO(m.from.toString() << " -> " << m.to.toString() << " on (" << m.mesh[0] << ", " << m.mesh[1]
                           << ")");
    for (int index = 0; index < n; ++index)
      REQUIRE(got[std::size_t(index)].bitEqual(
          takeShard(whole, m.to, placeOn(m.mesh, devices, index))));
    CHECK(counts.allToAll == n);  // one call per device
    CHECK(counts.allGather == 0);
    CHECK(counts.allReduce == 0);
  }
}
