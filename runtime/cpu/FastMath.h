// fp32 tanh the compiler can vectorise, for the GeLU kernels.
//
// The C library's tanhf is a call per element (it goes through expm1f), which
// made GeLU and its gradient a quarter of a GPT step's kernel time
// (bench/bench_runtime). These are branch-free arithmetic the loops around
// them auto-vectorise, accurate to a few ulp (tests/unit/kernels checks them
// against std::tanh):
// - |x| < 0.55: the Taylor series of tanh to x^17 (truncation error < 3e-9);
// - otherwise: sign(x)·(1 − e)/(1 + e) with e = exp(−2|x|) ≤ 1/3, so there is
//   no cancellation; exp by Cody–Waite range reduction (x = n·ln2 + r,
//   |r| ≤ ln2/2) and the Taylor series of exp(r) to r^7 (error < 6e-9).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace meshflow::runtime::cpu {

/// exp(x) for x ≤ 0; 0 below −87 (where exp(x) < 1.7e-38, near the smallest
/// normal float), NaN stays NaN. Flushing matters: softmax divides these
/// values by its row sum, and a GEMM reading subnormal floats runs some 50×
/// slower (the attention GEMM after a causal mask's −1e9 entries did).
inline float expNonPositive(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 split so that n·kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;
  float clamped = x >= -87.0f ? x : -87.0f;  // NaN too: the conversion below needs a number
  auto n = static_cast<std::int32_t>(clamped * kLog2e - 0.5f);  // round to nearest (x ≤ 0)
  float fn = static_cast<float>(n);
  float reduced = x == x ? clamped : x;  // a NaN carries through r and p
  float r = (reduced - fn * kLn2Hi) - fn * kLn2Lo;
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n, or +0 below −87 (and for −inf and NaN: NaN · 0 stays NaN). Selecting
  // the scale rather than the product keeps the loop free of branches: given
  // `x >= -87 ? p * scale : 0`, GCC with AVX enabled sinks the product into a
  // branch and no longer vectorises the loop.
  std::uint32_t scaleBits = x >= -87.0f ? static_cast<std::uint32_t>(n + 127) << 23 : 0u;
  return p * std::bit_cast<float>(scaleBits);
}

inline float fastTanh(float x) {
  float a = x < 0 ? -x : x;
  // Series: tanh x = x·Σ c_k (x²)^k.
  float z = x * x;
  float s = 6404582.0f / 10854718875.0f;
  s = s * z - 929569.0f / 638512875.0f;
  s = s * z + 21844.0f / 6081075.0f;
  s = s * z - 1382.0f / 155925.0f;
  s = s * z + 62.0f / 2835.0f;
  s = s * z - 17.0f / 315.0f;
  s = s * z + 2.0f / 15.0f;
  s = s * z - 1.0f / 3.0f;
  float series = x + x * z * s;
  float e = expNonPositive(-2.0f * a);
  float t = (1.0f - e) / (1.0f + e);
  float viaExp = x < 0 ? -t : t;
  return a >= 0.55f ? viaExp : series;  // NaN takes the series, which keeps it
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

/// Sigmoid in two forms, so exp never overflows.
inline float sigmoidOf(float x) {
  if (x >= 0) return 1.0f / (1.0f + std::exp(-x));
  float e = std::exp(x);
  return e / (1.0f + e);
}

/// GeLU, tanh form (the Gelu kernel's, and the fused bias + GeLU's).
inline float geluOf(float x) { return 0.5f * x * (1.0f + fastTanh(kGeluC * (x + kGeluA * x * x * x))); }

}  // namespace meshflow::runtime::cpu
