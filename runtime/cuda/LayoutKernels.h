// Kernels that move or convert elements without arithmetic, for any element
// type: the strided copies of the layout ops (transpose, concat, split, the
// attention heads' layout; cpu::layoutCopies says which) and the conversions
// between f32, f16 and bf16 (the Cast op, and the widening and rounding of
// half-precision operands around the f32 kernels). Conversions round as the
// host does (runtime/HalfBits.h), so results are the same bits.
#pragma once

#include <cstdint>

#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {

/// dst[dstBase + Σ i·dstStrides] = src[srcBase + Σ i·srcStrides] for every
/// index i of `shape` (in elements).
struct CopyIndex {
  int rank = 0;
  std::int64_t shape[kMaxRank] = {};
  std::int64_t srcStrides[kMaxRank] = {};
  std::int64_t dstStrides[kMaxRank] = {};
  std::int64_t srcBase = 0, dstBase = 0;
};

/// Merges neighbouring dimensions that both sides walk contiguously (fewer
/// index computations per element) and drops dimensions of size 1.
CopyIndex simplified(const CopyIndex& index);

/// The copy, for elements of 2, 4 or 8 bytes.
void stridedCopy(const void* src, void* dst, int elementBytes, const CopyIndex& index, Stream stream);

/// dst[i] = src[i] converted, for i < n: exact when widening, rounded to
/// nearest even when narrowing (f16 overflows to infinity, NaN stays NaN).
void convertFloats(const void* src, FloatFormat from, void* dst, FloatFormat to, std::int64_t n, Stream stream);

}  // namespace meshflow::runtime::cuda
