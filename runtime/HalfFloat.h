// The two 16-bit float formats the host stores (f16: IEEE binary16; bf16: the
// top half of an f32) and their conversions to and from f32. Kernels compute
// in f32: a half tensor is widened exactly, and a result is rounded back to
// nearest, ties to even, as every accelerator does when it stores a result.
#pragma once

#include <cstdint>
#include <span>

namespace meshflow::runtime {

/// An IEEE binary16 value's bits (1 sign, 5 exponent, 10 mantissa bits).
struct Half {
  std::uint16_t bits = 0;
  friend bool operator==(Half, Half) = default;
};

/// A bfloat16 value's bits: an f32's sign, 8 exponent bits and top 7 mantissa bits.
struct BFloat16 {
  std::uint16_t bits = 0;
  friend bool operator==(BFloat16, BFloat16) = default;
};

/// Rounds to nearest, ties to even. Magnitudes past the largest finite half
/// (65504, after rounding) become infinities; those below the smallest
/// subnormal's half become (signed) zeros; NaN stays a (quiet) NaN.
Half toHalf(float value);
/// Exact: every half is an f32.
float fromHalf(Half value);

/// Rounds to nearest, ties to even; NaN stays a quiet NaN (never rounds to
/// an infinity), and bf16 has f32's range, so only values within half a unit
/// of the last place of FLT_MAX overflow.
BFloat16 toBFloat16(float value);
/// Exact: appends 16 zero bits.
float fromBFloat16(BFloat16 value);

/// Element-wise conversions between spans of one length.
void widen(std::span<const Half> from, std::span<float> to);
void widen(std::span<const BFloat16> from, std::span<float> to);
void narrow(std::span<const float> from, std::span<Half> to);
void narrow(std::span<const float> from, std::span<BFloat16> to);

}  // namespace meshflow::runtime
