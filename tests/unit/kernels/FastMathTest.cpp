// The vectorisable tanh and exp of the activation and softmax kernels against
// the C library, over their whole range and at the edges.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "KernelTestSupport.h"
#include "runtime/cpu/FastMath.h"

using meshflow::runtime::cpu::expNonPositive;
using meshflow::runtime::cpu::fastTanh;
using meshflow::ir::OpKind;
using meshflow::runtime::Tensor;

TEST_CASE("fastTanh is within a few ulp of tanh", "[kernels][fastmath]") {
  double worst = 0;
  for (double x = -12; x <= 12; x += 1.0 / 4096) {
    auto f = static_cast<float>(x);
    double exact = std::tanh(static_cast<double>(f));
    double error = std::fabs(double(fastTanh(f)) - exact);
    // Relative near zero, absolute (against 1) in the tails.
    worst = std::max(worst, error / std::max(std::fabs(exact), 1e-30));
  }
  INFO("worst relative error " << worst);
  CHECK(worst < 4.0 * std::numeric_limits<float>::epsilon());
  CHECK(fastTanh(0.0f) == 0.0f);
  CHECK(fastTanh(1e-30f) == 1e-30f);
  CHECK(fastTanh(-1e-20f) == -1e-20f);
  CHECK(fastTanh(100.0f) == 1.0f);
  CHECK(fastTanh(-1e30f) == -1.0f);
  CHECK(std::isnan(fastTanh(std::numeric_limits<float>::quiet_NaN())));
  // Odd, and continuous where the two forms meet.
  CHECK(fastTanh(-0.3f) == -fastTanh(0.3f));
  CHECK(std::fabs(fastTanh(0.55f) - fastTanh(std::nextafter(0.55f, 0.0f))) < 1e-6f);
}

TEST_CASE("expNonPositive is within a few ulp of exp", "[kernels][fastmath]") {
  double worst = 0;
  for (double x = -87; x <= 0; x += 1.0 / 1024) {
    auto f = static_cast<float>(x);
    double exact = std::exp(static_cast<double>(f));
    worst = std::max(worst, std::fabs(double(expNonPositive(f)) - exact) / exact);
  }
  INFO("worst relative error " << worst);
  CHECK(worst < 4.0 * std::numeric_limits<float>::epsilon());
  CHECK(expNonPositive(0.0f) == 1.0f);
  // Below −87 exactly 0, never a subnormal (a GEMM reading those is ~50× slower).
  CHECK(expNonPositive(-87.5f) == 0.0f);
  CHECK(expNonPositive(-1000.0f) == 0.0f);
  CHECK(expNonPositive(-1e9f) == 0.0f);
  CHECK(expNonPositive(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::fpclassify(expNonPositive(-87.0f)) == FP_NORMAL);
  CHECK(std::isnan(expNonPositive(std::numeric_limits<float>::quiet_NaN())));
}

// The kernels are compiled for the machine's widest vectors (MESHFLOW_NATIVE_KERNELS)
// while this file is not: each lane must give the bits the scalar function gives,
// at the edges too (NaN, infinities, the flush below −87, the switch at 0.55).
TEST_CASE("the vectorised GeLU and tanh kernels give the scalar functions' bits", "[kernels][fastmath]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> xs = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 0.0f, -0.0f, 1e-30f, -1e-20f,
                           0.55f, std::nextafter(0.55f, 0.0f), -0.55f, 1000.0f, -1000.0f, -43.6f, -43.4f};
  for (int i = 0; xs.size() < 203; ++i) xs.push_back(static_cast<float>(i - 100) / 16.0f);  // not a multiple of 16
  Tensor x = Tensor::fromF32({static_cast<std::int64_t>(xs.size())}, xs);
  const Tensor tanhOut = kernel_test::run1(OpKind::Tanh, {x});
  const Tensor geluOut = kernel_test::run1(OpKind::Gelu, {x});
  auto tanh = tanhOut.f32();
  auto gelu = geluOut.f32();
  for (std::size_t i = 0; i < xs.size(); ++i) {
    INFO("x = " << xs[i]);
    float t = fastTanh(xs[i]);
    float g = 0.5f * xs[i] * (1.0f + fastTanh(0.7978845608028654f * (xs[i] + 0.044715f * xs[i] * xs[i] * xs[i])));
    CHECK(std::bit_cast<std::uint32_t>(tanh[i]) == std::bit_cast<std::uint32_t>(t));
    if (std::isnan(g))
      CHECK(std::isnan(gelu[i]));
    else
      CHECK(std::bit_cast<std::uint32_t>(gelu[i]) == std::bit_cast<std::uint32_t>(g));
  }
}

TEST_CASE("softmax rows flush what exp would make subnormal, and keep NaN", "[kernels][fastmath]") {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> row = {0.0f, -1.0f, -90.0f, -1e9f, -inf, -86.9f};
  std::vector<float> values;
  for (int r = 0; r < 5; ++r) values.insert(values.end(), row.begin(), row.end());
  values.back() = std::numeric_limits<float>::quiet_NaN();  // the last row holds a NaN
  const Tensor out = kernel_test::run1(OpKind::Softmax, {Tensor::fromF32({5, 6}, values)});
  auto y = out.f32();
  for (int r = 0; r < 4; ++r) {
    INFO("row " << r);
    CHECK(y[r * 6 + 2] == 0.0f);
    CHECK(y[r * 6 + 3] == 0.0f);
    CHECK(y[r * 6 + 4] == 0.0f);
    CHECK(std::fpclassify(y[r * 6 + 5]) == FP_NORMAL);
    CHECK(y[r * 6 + 0] / y[r * 6 + 1] == Approx(std::exp(1.0)).epsilon(1e-5));
  }
  CHECK(std::isnan(y[4 * 6 + 0]));
}
