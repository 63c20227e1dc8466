// The bit-level conversions between f32 and the two 16-bit float formats,
// for the host (runtime/HalfFloat.cpp) and the GPU (runtime/cuda's cast
// kernels) alike, so that both round the same values to the same bits: to
// nearest, ties to even; f16 overflows to infinity; a NaN stays a quiet NaN.
// Plain integer arithmetic on an f32's bits, C++17, nothing from the standard
// library but <cstdint> and <cstring>.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define MESHFLOW_HOST_DEVICE __host__ __device__
#else
#define MESHFLOW_HOST_DEVICE
#endif

namespace meshflow::runtime::half_bits {

constexpr std::uint32_t kF32SignBit = 0x80000000u;
constexpr std::uint32_t kF32Exponent = 0x7f800000u;
constexpr std::uint32_t kF32Mantissa = 0x007fffffu;

MESHFLOW_HOST_DEVICE inline std::uint32_t bitsOf(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

MESHFLOW_HOST_DEVICE inline float floatOf(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// Shifts `bits` right by `shift`, rounding to nearest with ties to even.
MESHFLOW_HOST_DEVICE inline std::uint32_t shiftRoundingToEven(std::uint32_t bits, int shift) {
  if (shift <= 0) return bits;
  if (shift > 31) return 0;
  std::uint32_t kept = bits >> shift;
  std::uint32_t rest = bits & ((1u << shift) - 1);
  std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1u))) ++kept;
  return kept;
}

/// An f32's bits rounded to an IEEE binary16's bits.
MESHFLOW_HOST_DEVICE inline std::uint16_t halfFromF32(std::uint32_t f) {
  auto sign = static_cast<std::uint16_t>((f & kF32SignBit) >> 16);
  std::uint32_t exponent = (f & kF32Exponent) >> 23;
  std::uint32_t mantissa = f & kF32Mantissa;
  if (exponent == 0xff)  // infinity, or NaN with its top payload bit set so it stays quiet
    return static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa ? 0x0200u | (mantissa >> 13) : 0));
  int unbiased = static_cast<int>(exponent) - 127;
  if (unbiased >= -14) {
    // A normal half (or an overflow): round the 23-bit mantissa to 10 bits. A
    // carry out of the mantissa correctly bumps the exponent, and past the
    // largest exponent it lands exactly on the infinity's bits.
    std::uint32_t biased = static_cast<std::uint32_t>(unbiased + 15);
    if (biased >= 0x1f) return static_cast<std::uint16_t>(sign | 0x7c00u);
    std::uint32_t bits = (biased << 10) + shiftRoundingToEven(mantissa, 13);
    if (bits >= 0x7c00u) bits = 0x7c00u;
    return static_cast<std::uint16_t>(sign | bits);
  }
  // A subnormal half (or zero): the implicit leading 1 joins the mantissa and
  // the whole is shifted to the subnormal's fixed exponent 2^-24 per unit; a
  // carry into bit 10 makes the smallest normal, which is the right encoding.
  if (exponent == 0) return sign;  // f32 subnormals are far below half's range
  std::uint32_t full = mantissa | 0x00800000u;
  int shift = 13 + (-14 - unbiased);
  return static_cast<std::uint16_t>(sign | shiftRoundingToEven(full, shift));
}

/// A binary16's value as an f32 (exact).
MESHFLOW_HOST_DEVICE inline float f32FromHalf(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exponent = (h >> 10) & 0x1fu;
  std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) return floatOf(sign | kF32Exponent | (mantissa << 13));
  if (exponent != 0) return floatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa · 2^-24, exact in f32.
  float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

/// An f32's bits rounded to a bfloat16's bits.
MESHFLOW_HOST_DEVICE inline std::uint16_t bfloat16FromF32(std::uint32_t f) {
  // Rounding a NaN's payload could carry it into an infinity; keep it a quiet NaN.
  if ((f & kF32Exponent) == kF32Exponent && (f & kF32Mantissa)) return static_cast<std::uint16_t>((f >> 16) | 0x0040u);
  std::uint32_t rounded = f + 0x7fffu + ((f >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

/// A bfloat16's value as an f32 (exact: 16 zero bits appended).
MESHFLOW_HOST_DEVICE inline float f32FromBFloat16(std::uint16_t b) { return floatOf(static_cast<std::uint32_t>(b) << 16); }

}  // namespace meshflow::runtime::half_bits
