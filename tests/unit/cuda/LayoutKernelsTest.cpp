// The GPU copies' index arithmetic on the host: cuda::simplified (which merges
// the dimensions both sides walk contiguously) must describe the same copy as
// the index it came from. A host walk of both indices over the same source
// must write the same destination, for the layouts the layout ops make.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include "runtime/cuda/LayoutKernels.h"

namespace cuda = meshflow::runtime::cuda;

namespace {

// What stridedCopy does on the GPU, on the host: for every index of the shape
// in row-major order, dst[dstBase + Σ i·dstStrides] = src[srcBase + Σ i·srcStrides].
std::vector<int> walk(const cuda::CopyIndex& ix, const std::vector<int>& src, std::size_t dstSize) {
  std::vector<int> dst(dstSize, -1);
  std::int64_t n = 1;
  for (int d = 0; d < ix.rank; ++d) n *= ix.shape[d];
  for (std::int64_t i = 0; i < n; ++i) {
    std::int64_t rest = i, from = ix.srcBase, to = ix.dstBase;
    for (int d = ix.rank - 1; d >= 0; --d) {
      from += rest % ix.shape[d] * ix.srcStrides[d];
      to += rest % ix.shape[d] * ix.dstStrides[d];
      rest /= ix.shape[d];
    }
    dst.at(static_cast<std::size_t>(to)) = src.at(static_cast<std::size_t>(from));
  }
  return dst;
}

cuda::CopyIndex indexOf(std::vector<std::int64_t> shape, std::vector<std::int64_t> src, std::vector<std::int64_t> dst,
                        std::int64_t srcBase = 0, std::int64_t dstBase = 0) {
  cuda::CopyIndex ix;
  ix.rank = static_cast<int>(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) {
    ix.shape[d] = shape[d];
    ix.srcStrides[d] = src[d];
    ix.dstStrides[d] = dst[d];
  }
  ix.srcBase = srcBase;
  ix.dstBase = dstBase;
  return ix;
}

void expectSameCopy(const cuda::CopyIndex& ix, std::size_t srcSize, std::size_t dstSize) {
  std::vector<int> src(srcSize);
  std::iota(src.begin(), src.end(), 0);
  CHECK(walk(cuda::simplified(ix), src, dstSize) == walk(ix, src, dstSize));
}

}  // namespace

TEST_CASE("simplified GPU copy indices describe the same copy", "[cuda]") {
  // split_heads of x[2, 5, 12] into 3 heads: y[2, 3, 5, 4] reading x as [b, s, heads, d].
  expectSameCopy(indexOf({2, 3, 5, 4}, {60, 4, 12, 1}, {60, 20, 4, 1}), 120, 120);
  // merge_heads: y[2, 5, 3, 4] (viewed) from x[2, 3, 5, 4].
  expectSameCopy(indexOf({2, 5, 3, 4}, {60, 4, 20, 1}, {60, 12, 4, 1}), 120, 120);
  // The second of three parts of x[2, 5, 36] split along the last axis.
  expectSameCopy(indexOf({2, 5, 12}, {180, 36, 1}, {60, 12, 1}, 12), 360, 120);
  // The second input of a concat along axis 1 into y[3, 6, 7].
  expectSameCopy(indexOf({3, 4, 7}, {28, 7, 1}, {42, 7, 1}, 0, 14), 84, 126);
  // A transpose of the last two axes, and one with size-1 dimensions.
  expectSameCopy(indexOf({4, 65, 33}, {2145, 1, 65}, {2145, 33, 1}), 8580, 8580);
  expectSameCopy(indexOf({1, 7, 1, 3}, {21, 1, 21, 7}, {21, 3, 3, 1}), 21, 21);
}

TEST_CASE("simplified merges what both sides walk contiguously and drops unit dimensions", "[cuda]") {
  // A contiguous copy becomes one dimension.
  cuda::CopyIndex flat = cuda::simplified(indexOf({2, 3, 4}, {12, 4, 1}, {12, 4, 1}));
  CHECK(flat.rank == 1);
  CHECK(flat.shape[0] == 24);
  // A transpose of the last two keeps its two swapped axes (and merges nothing else).
  cuda::CopyIndex swapped = cuda::simplified(indexOf({1, 65, 33}, {2145, 1, 65}, {2145, 33, 1}));
  CHECK(swapped.rank == 2);
  // The rows of a split stay rows: [2·5 rows, 12 wide].
  cuda::CopyIndex rows = cuda::simplified(indexOf({2, 5, 12}, {180, 36, 1}, {60, 12, 1}, 12));
  CHECK(rows.rank == 2);
  CHECK(rows.shape[0] == 10);
  CHECK(rows.srcBase == 12);
  // A single element (every dimension 1) is rank 0: one copy at the bases.
  cuda::CopyIndex one = cuda::simplified(indexOf({1, 1}, {5, 1}, {1, 1}, 3, 0));
  CHECK(one.rank == 0);
  CHECK(one.srcBase == 3);
}

TEST_CASE("stridedCopy and convertFloats refuse bad arguments before any launch", "[cuda]") {
  cuda::CopyIndex ix = indexOf({2}, {1}, {1});
  int a[2] = {1, 2}, b[2] = {};
  CHECK_THROWS_AS(cuda::stridedCopy(a, b, 3, ix, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::stridedCopy(nullptr, b, 4, ix, nullptr), std::invalid_argument);
  ix.rank = 9;
  CHECK_THROWS_AS(cuda::stridedCopy(a, b, 4, ix, nullptr), std::invalid_argument);
  CHECK_THROWS_AS(cuda::convertFloats(nullptr, cuda::FloatFormat::kF32, b, cuda::FloatFormat::kBF16, 2, nullptr),
                  std::invalid_argument);
  CHECK_THROWS_AS(cuda::convertFloats(a, cuda::FloatFormat::kF32, b, cuda::FloatFormat::kBF16, -1, nullptr),
                  std::invalid_argument);
  // Nothing to copy or convert: no launch, no error, even without a GPU.
  cuda::stridedCopy(a, b, 4, indexOf({0}, {1}, {1}), nullptr);
  cuda::convertFloats(a, cuda::FloatFormat::kF32, b, cuda::FloatFormat::kBF16, 0, nullptr);
}
