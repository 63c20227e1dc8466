// An embedding gradient's positions grouped by id: every position once, ids
// ascending, positions in order within an id (the cpu kernel's summation
// order), and the packed array the GPU kernel reads.
#include <catch2/catch.hpp>

#include <random>

#include "runtime/cuda/PositionGroups.h"

namespace cuda = meshflow::runtime::cuda;

TEST_CASE("positions grouped by id keep position order within each id", "[cuda][embedding]") {
  const std::vector<std::int32_t> ids{5, 2, 5, 0, 2, 5};
  const cuda::PositionGroups g = cuda::groupPositions(ids);
  CHECK(g.ids == std::vector<std::int32_t>{0, 2, 5});
  CHECK(g.starts == std::vector<std::int32_t>{0, 1, 3, 6});
  CHECK(g.order == std::vector<std::int32_t>{3, 1, 4, 0, 2, 5});
  CHECK(g.groups() == 3);
  CHECK(g.packed() == std::vector<std::int32_t>{3, 1, 4, 0, 2, 5, 0, 1, 3, 6, 0, 2, 5});
}

TEST_CASE("no positions make no groups", "[cuda][embedding]") {
  const cuda::PositionGroups g = cuda::groupPositions({});
  CHECK(g.groups() == 0);
  CHECK(g.starts == std::vector<std::int32_t>{0});
  CHECK(g.order.empty());
}

TEST_CASE("random ids: summing by groups gives the cpu kernel's sums bit for bit", "[cuda][embedding]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::int32_t> id(0, 30);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<std::int32_t> ids(500);
  std::vector<float> dy(ids.size());
  for (auto& x : ids) x = id(rng);
  for (auto& x : dy) x = value(rng);
  std::vector<float> expected(31, 0.0f), actual(31, 0.0f);
  for (std::size_t p = 0; p < ids.size(); ++p) expected[ids[p]] += dy[p];  // the cpu kernel, one column
  const cuda::PositionGroups g = cuda::groupPositions(ids);
  for (std::int64_t k = 0; k < g.groups(); ++k) {  // the GPU kernel's thread for (group k, column 0)
    float sum = 0.0f;
    for (std::int32_t i = g.starts[k]; i < g.starts[k + 1]; ++i) sum += dy[g.order[i]];
    actual[g.ids[k]] = sum;
  }
  CHECK(actual == expected);
}
