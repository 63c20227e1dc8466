// The vectorisable tanh and exp of the activation and softmax kernels against
// the C library, over their whole range and at the edges.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "runtime/cpu/FastMath.h"

using meshflow::runtime::cpu::expNonPositive;
using meshflow::runtime::cpu::fastTanh;

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
