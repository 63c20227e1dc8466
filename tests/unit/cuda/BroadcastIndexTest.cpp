// The broadcasting kernels' index arithmetic on the host: cuda::simplified
// (dimensions of size 1 dropped, neighbours both operands walk together
// merged) must read the same operand elements for every output element.
#include <catch2/catch.hpp>

#include <utility>
#include <vector>

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cuda/TrainingKernels.h"

namespace cuda = meshflow::runtime::cuda;
namespace cpu = meshflow::runtime::cpu;
using meshflow::runtime::Shape;

namespace {

cuda::BroadcastIndex indexOf(const Shape& a, const Shape& b) {
  const Shape out = *cpu::broadcastShapes(a, b);
  const auto sa = cpu::broadcastStrides(a, out), sb = cpu::broadcastStrides(b, out);
  cuda::BroadcastIndex ix;
  ix.rank = static_cast<int>(out.size());
  for (std::size_t d = 0; d < out.size(); ++d) {
    ix.shape[d] = out[d];
    ix.stridesA[d] = sa[d];
    ix.stridesB[d] = sb[d];
  }
  return ix;
}

// What the kernel reads for each output element, in order.
std::vector<std::pair<std::int64_t, std::int64_t>> reads(const cuda::BroadcastIndex& ix) {
  std::int64_t n = 1;
  for (int d = 0; d < ix.rank; ++d) n *= ix.shape[d];
  std::vector<std::pair<std::int64_t, std::int64_t>> offsets;
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i, a = 0, b = 0;
    for (int d = ix.rank - 1; d >= 0; --d) {
      a += rest % ix.shape[d] * ix.stridesA[d];
      b += rest % ix.shape[d] * ix.stridesB[d];
      rest /= ix.shape[d];
    }
    offsets.emplace_back(a, b);
  }
  return offsets;
}

}  // namespace

TEST_CASE("simplified broadcast indices read the same elements", "[cuda]") {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{8, 16, 4}, {8, 16, 4}},        // same shape: one dimension
      {{8, 16, 32}, {32}},             // a bias over rows
      {{8, 16, 32}, {16, 1}},          // a column over the last axis
      {{2, 1, 5, 3}, {1, 4, 5, 1}},    // both sides broadcast
      {{4, 6}, {}},                    // a scalar
      {{1, 1, 7}, {3, 1, 7}},          // leading ones
  };
  for (const auto& [a, b] : cases) {
    const cuda::BroadcastIndex ix = indexOf(a, b);
    CHECK(reads(cuda::simplified(ix)) == reads(ix));
  }
  CHECK(cuda::simplified(indexOf({8, 16, 4}, {8, 16, 4})).rank == 1);
  CHECK(cuda::simplified(indexOf({8, 16, 32}, {32})).rank == 2);
  CHECK(cuda::simplified(indexOf({4, 6}, {})).rank == 1);
}
