// Flat shards over data-parallel replicas (runtime/parallel/FlatShards.h): the
// padding, the packing of several tensors into one collective's operand, and
// the way back.
#include <catch2/catch.hpp>

#include "runtime/parallel/FlatShards.h"

using namespace meshflow::runtime;

namespace {

Tensor iota(Shape shape, float from = 1) {
  Tensor t(meshflow::ir::DType::F32, std::move(shape));
  for (std::size_t i = 0; i < t.f32().size(); ++i) t.f32()[i] = from + static_cast<float>(i);
  return t;
}

std::vector<float> values(const Tensor& t) { return {t.f32().begin(), t.f32().end()}; }

}  // namespace

TEST_CASE("a flat shard is a run of ceil(n / R) elements, zero past the end", "[runtime][zero]") {
  const Tensor t = iota({2, 3, 1});  // 6 elements over 4 replicas: 2 each, the last all padding
  CHECK(flatShardSize(6, 4) == 2);
  CHECK(flatShardSize(6, 3) == 2);
  CHECK(flatShardSize(0, 3) == 0);
  CHECK(values(flatShardOf(t, 0, 4)) == std::vector<float>{1, 2});
  CHECK(values(flatShardOf(t, 2, 4)) == std::vector<float>{5, 6});
  CHECK(values(flatShardOf(t, 3, 4)) == std::vector<float>{0, 0});
  Tensor back(meshflow::ir::DType::F32, {2, 3, 1});
  for (int i = 0; i < 4; ++i) putFlatShard(back, flatShardOf(t, i, 4), i, 4);
  CHECK(back.bitEqual(t));
}

TEST_CASE("packed parts go row by row and come back whole", "[runtime][zero]") {
  // Three replicas: a [2, 2] (c = 2, two padding elements) and a [5] (c = 2, one).
  const Tensor a = iota({2, 2}, 1), b = iota({5}, 10);
  const Tensor packed = packParts({&a, &b}, 3);
  CHECK(packed.shape() == Shape{3, 4});
  CHECK(values(packed) == std::vector<float>{1, 2, 10, 11, 3, 4, 12, 13, 0, 0, 14, 0});
  const Tensor row = Tensor::fromF32({4}, {3, 4, 12, 13});
  const std::vector<Tensor> parts = unpackRow(row, {4, 5}, 3);
  REQUIRE(parts.size() == 2);
  CHECK(values(parts[0]) == std::vector<float>{3, 4});
  CHECK(values(parts[1]) == std::vector<float>{12, 13});
  CHECK(values(packRow({&parts[0], &parts[1]})) == std::vector<float>{3, 4, 12, 13});
  CHECK(packRow({&parts[0], &parts[1]}).shape() == Shape{1, 4});
  CHECK(unpackWhole(packed, 0, {2, 2}, 3).bitEqual(a));
  CHECK(unpackWhole(packed, 2, {5}, 3).bitEqual(b));
}
