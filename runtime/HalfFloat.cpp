#include "runtime/HalfFloat.h"

#include <bit>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace meshflow::runtime {
namespace {

constexpr std::uint32_t kF32SignBit = 0x80000000u;
constexpr std::uint32_t kF32Exponent = 0x7f800000u;
constexpr std::uint32_t kF32Mantissa = 0x007fffffu;

// Shifts `bits` right by `shift`, rounding to nearest with ties to even.
std::uint32_t shiftRoundingToEven(std::uint32_t bits, int shift) {
  if (shift <= 0) return bits;
  if (shift > 31) return 0;
  std::uint32_t kept = bits >> shift;
  std::uint32_t rest = bits & ((1u << shift) - 1);
  std::uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (kept & 1u))) ++kept;
  return kept;
}

}  // namespace

Half toHalf(float value) {
  std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  auto sign = static_cast<std::uint16_t>((f & kF32SignBit) >> 16);
  std::uint32_t exponent = (f & kF32Exponent) >> 23;
  std::uint32_t mantissa = f & kF32Mantissa;
  if (exponent == 0xff)  // infinity, or NaN with its top payload bit set so it stays quiet
    return {
        static_cast<std::uint16_t>(sign | 0x7c00u | (mantissa ? 0x0200u | (mantissa >> 13) : 0))};
  int unbiased = static_cast<int>(exponent) - 127;
  if (unbiased >= -14) {
    // A normal half (or an overflow): round the 23-bit mantissa to 10 bits. A
    // carry out of the mantissa correctly bumps the exponent, and past the
    // largest exponent it lands exactly on the infinity's bits.
    std::uint32_t biased = static_cast<std::uint32_t>(unbiased + 15);
    if (biased >= 0x1f) return {static_cast<std::uint16_t>(sign | 0x7c00u)};
    std::uint32_t bits = (biased << 10) + shiftRoundingToEven(mantissa, 13);
    if (bits >= 0x7c00u) bits = 0x7c00u;
    return {static_cast<std::uint16_t>(sign | bits)};
  }
  // A subnormal half (or zero): the implicit leading 1 joins the mantissa and
  // the whole is shifted to the subnormal's fixed exponent 2^-24 per unit; a
  // carry into bit 10 makes the smallest normal, which is the right encoding.
  if (exponent == 0) return {sign};  // f32 subnormals are far below half's range
  std::uint32_t full = mantissa | 0x00800000u;
  int shift = 13 + (-14 - unbiased);
  return {static_cast<std::uint16_t>(sign | shiftRoundingToEven(full, shift))};
}

float fromHalf(Half value) {
  std::uint32_t sign = static_cast<std::uint32_t>(value.bits & 0x8000u) << 16;
  std::uint32_t exponent = (value.bits >> 10) & 0x1fu;
  std::uint32_t mantissa = value.bits & 0x3ffu;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | kF32Exponent | (mantissa << 13));
  if (exponent != 0)
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa · 2^-24, exact in f32.
  float magnitude = static_cast<float>(mantissa) * 0x1.0p-24f;
  return sign ? -magnitude : magnitude;
}

BFloat16 toBFloat16(float value) {
  std::uint32_t f = std::bit_cast<std::uint32_t>(value);
  // Rounding a NaN's payload could carry it into an infinity; keep it a quiet NaN.
  if ((f & kF32Exponent) == kF32Exponent && (f & kF32Mantissa))
    return {static_cast<std::uint16_t>((f >> 16) | 0x0040u)};
  std::uint32_t rounded = f + 0x7fffu + ((f >> 16) & 1u);
  return {static_cast<std::uint16_t>(rounded >> 16)};
}

float fromBFloat16(BFloat16 value) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(value.bits) << 16);
}

// With F16C (a native build on x86-64 since 2012), eight conversions at a
// time: the instructions round to nearest even and overflow to infinity, as
// toHalf does, so results are the same bits either way (HalfFloatTest).
void widen(std::span<const Half> from, std::span<float> to) {
  std::size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= from.size(); i += 8) {
    __m128i halves = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from.data() + i));
    _mm256_storeu_ps(to.data() + i, _mm256_cvtph_ps(halves));
  }
#endif
  for (; i < from.size(); ++i) to[i] = fromHalf(from[i]);
}

void widen(std::span<const BFloat16> from, std::span<float> to) {
  for (std::size_t i = 0; i < from.size(); ++i) to[i] = fromBFloat16(from[i]);
}

void narrow(std::span<const float> from, std::span<Half> to) {
  std::size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= from.size(); i += 8) {
    __m128i halves = _mm256_cvtps_ph(_mm256_loadu_ps(from.data() + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(to.data() + i), halves);
  }
#endif
  for (; i < from.size(); ++i) to[i] = toHalf(from[i]);
}

void narrow(std::span<const float> from, std::span<BFloat16> to) {
  for (std::size_t i = 0; i < from.size(); ++i) to[i] = toBFloat16(from[i]);
}

}  // namespace meshflow::runtime
