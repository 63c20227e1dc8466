#include "runtime/HalfFloat.h"

#include "runtime/HalfBits.h"


#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace meshflow::runtime {

Half toHalf(float value) { return {half_bits::halfFromF32(half_bits::bitsOf(value))}; }

float fromHalf(Half value) { return half_bits::f32FromHalf(value.bits); }

BFloat16 toBFloat16(float value) { return {half_bits::bfloat16FromF32(half_bits::bitsOf(value))}; }

float fromBFloat16(BFloat16 value) { return half_bits::f32FromBFloat16(value.bits); }

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
