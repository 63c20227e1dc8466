// meshflow's own AVX-512 sgemm (runtime/cpu/Sgemm.h): the exact summation
// order it documents, to the bit, at shapes that cross every blocking edge,
// and what that order buys (a GEMM over some rows or columns of another
// gives them to the bit, whatever the transposes). On a CPU without AVX-512
// the own kernel does not run and these cases say so.
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "runtime/cpu/Sgemm.h"

using meshflow::runtime::cpu::GemmShape;
using meshflow::runtime::cpu::kSgemmDepthBlock;
using meshflow::runtime::cpu::openblasSgemm;
using meshflow::runtime::cpu::ownSgemm;
using meshflow::runtime::cpu::sgemmImplementation;

namespace {

std::vector<float> randomMatrix(std::int64_t elements, unsigned seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal;
  std::vector<float> values(static_cast<std::size_t>(elements));
  for (float& v : values) v = normal(engine);
  return values;
}

// Element (row, col) of op(x) for an operand stored [rows, cols] or, when
// transposed, [cols, rows].
float at(const std::vector<float>& x, std::int64_t row, std::int64_t col, std::int64_t rows,
         std::int64_t cols, bool transposed) {
  return transposed ? x[static_cast<std::size_t>(col * rows + row)]
                    : x[static_cast<std::size_t>(row * cols + col)];
}

// The order Sgemm.h promises, one element at a time: fused multiply-adds in
// order within each depth block, the blocks' sums added to y in order.
std::vector<float> documentedOrder(const std::vector<float>& a, const std::vector<float>& b,
                                   const GemmShape& s) {
  std::vector<float> y(static_cast<std::size_t>(s.m * s.n));
  for (std::int64_t i = 0; i < s.m; ++i)
    for (std::int64_t j = 0; j < s.n; ++j) {
      float sum = 0;
      for (std::int64_t p0 = 0; p0 < s.k; p0 += kSgemmDepthBlock) {
        float block = 0;
        for (std::int64_t p = p0; p < std::min(s.k, p0 + kSgemmDepthBlock); ++p)
          block = std::fma(at(a, i, p, s.m, s.k, s.transposeA), at(b, p, j, s.k, s.n, s.transposeB),
                           block);
        sum = p0 == 0 ? block : sum + block;
      }
      y[static_cast<std::size_t>(i * s.n + j)] = sum;
    }
  return y;
}

std::int64_t bitDifferences(const std::vector<float>& x, const std::vector<float>& y) {
  std::int64_t differ = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    differ += std::bit_cast<std::uint32_t>(x[i]) != std::bit_cast<std::uint32_t>(y[i]);
  return differ;
}

bool hasOwnKernel() {
  float y = 0, one = 1;
  if (ownSgemm(&one, &one, &y, {1, 1, 1, false, false})) return true;
  WARN("this CPU has no AVX-512: the own sgemm is not run (sgemm uses OpenBLAS)");
  return false;
}

std::string describe(const GemmShape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
         (s.transposeA ? " a transposed" : "") + (s.transposeB ? " b transposed" : "");
}

}  // namespace

TEST_CASE("the own sgemm sums in the documented order, to the bit", "[kernels][sgemm]") {
  if (!hasOwnKernel()) return;
  // Edges of every block: a 12-row tile, a 32-column tile, the 256-deep block,
  // the 192-row block and the 2048-column block, and single rows and columns.
  const std::vector<GemmShape> shapes = {{1, 1, 1},     {13, 33, 7},    {12, 32, 256},
                                         {25, 65, 257}, {193, 47, 600}, {5, 2049, 40},
                                         {64, 64, 64},  {1, 100, 513},  {100, 1, 300}};
  for (GemmShape s : shapes)
    for (int t = 0; t < 4; ++t) {
      s.transposeA = (t & 1) != 0;
      s.transposeB = (t & 2) != 0;
      auto a = randomMatrix(s.m * s.k, 1), b = randomMatrix(s.k * s.n, 2);
      std::vector<float> y(static_cast<std::size_t>(s.m * s.n), std::nanf(""));
      REQUIRE(ownSgemm(a.data(), b.data(), y.data(), s));
      INFO(describe(s));
      CHECK(bitDifferences(y, documentedOrder(a, b, s)) == 0);
    }
}

TEST_CASE("the own sgemm gives a block of rows or columns to the bit", "[kernels][sgemm]") {
  if (!hasOwnKernel()) return;
  // y = a · b at 200 x 70 x 300; then rows 37..136 alone (a slice of a's rows),
  // and columns 5..45 alone (b's columns, from bᵀ stored [n, k]).
  const GemmShape whole{200, 70, 300};
  auto a = randomMatrix(whole.m * whole.k, 3), b = randomMatrix(whole.k * whole.n, 4);
  std::vector<float> y(static_cast<std::size_t>(whole.m * whole.n));
  REQUIRE(ownSgemm(a.data(), b.data(), y.data(), whole));

  const std::int64_t r0 = 37, rows = 100;
  std::vector<float> yRows(static_cast<std::size_t>(rows * whole.n));
  ownSgemm(a.data() + r0 * whole.k, b.data(), yRows.data(), {rows, whole.n, whole.k});
  CHECK(bitDifferences(yRows, std::vector<float>(y.begin() + r0 * whole.n,
                                                 y.begin() + (r0 + rows) * whole.n)) == 0);

  const std::int64_t c0 = 5, cols = 41;
  std::vector<float> bTransposed(static_cast<std::size_t>(cols * whole.k));
  for (std::int64_t j = 0; j < cols; ++j)
    for (std::int64_t p = 0; p < whole.k; ++p)
      bTransposed[static_cast<std::size_t>(j * whole.k + p)] =
          b[static_cast<std::size_t>(p * whole.n + c0 + j)];
  std::vector<float> yCols(static_cast<std::size_t>(whole.m * cols));
  ownSgemm(a.data(), bTransposed.data(), yCols.data(), {whole.m, cols, whole.k, false, true});
  std::vector<float> expected;
  for (std::int64_t i = 0; i < whole.m; ++i)
    for (std::int64_t j = 0; j < cols; ++j)
      expected.push_back(y[static_cast<std::size_t>(i * whole.n + c0 + j)]);
  CHECK(bitDifferences(yCols, expected) == 0);
}

TEST_CASE("the own sgemm agrees with OpenBLAS within rounding", "[kernels][sgemm]") {
  if (!hasOwnKernel()) return;
  const GemmShape s{130, 90, 700, true, false};
  auto a = randomMatrix(s.m * s.k, 5), b = randomMatrix(s.k * s.n, 6);
  std::vector<float> own(static_cast<std::size_t>(s.m * s.n)), blas(own.size());
  ownSgemm(a.data(), b.data(), own.data(), s);
  openblasSgemm(a.data(), b.data(), blas.data(), s);
  double worst = 0;
  for (std::size_t i = 0; i < own.size(); ++i)
    worst = std::max(worst, double(std::fabs(own[i] - blas[i])));
  // Products of unit normals summed over k = 700: a few ulp of sqrt(700) ≈ 26.
  CHECK(worst < 1e-4);
  CHECK(worst > 0);  // two summation orders: equal to the bit only by accident
}

TEST_CASE("sgemm names its implementation and zeroes y when k is 0", "[kernels][sgemm]") {
  const std::string chosen = sgemmImplementation();
  CHECK((chosen == "avx512" || chosen == "openblas"));
  std::vector<float> y(6, 7.0f);
  meshflow::runtime::cpu::sgemm(nullptr, nullptr, y.data(), {2, 3, 0});
  CHECK(y == std::vector<float>(6, 0.0f));
}
