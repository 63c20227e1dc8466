// The kernels of the fused groups (runtime/FusedOps.h) that Kernels.h's
// softmax(…, scale, causal, …) does not already cover: softmax's backward
// with the causal mask's and Scale's, and bias + GeLU. Each computes what
// the unfused chain of CUDA kernels computes, in the same order, rounding
// each intermediate to `format` where an op of the chain would store it:
// the chain's bits, in one launch and one pass over memory.
#pragma once

#include <cstdint>

#include "runtime/cuda/Kernels.h"

namespace meshflow::runtime::cuda {

/// dx = scale · mask0(y · (dy − Σ y·dy)) per row of `width` (the dot over the
/// whole row, in double, as SoftmaxGrad's). `causal`: rows are [..., s, s]
/// and row i keeps its first i + 1 entries, the rest of dx is 0.
void scaledMaskedSoftmaxGrad(FloatFormat format, const void* y, const void* dy, void* dx, std::int64_t rows,
                             std::int64_t width, float scale, bool causal, Stream stream);

/// z = x + bias (bias of `width` elements repeating along x's last dimension,
/// n a multiple of it), y = gelu(z). `z` may be null: not written.
void biasGelu(FloatFormat format, const void* x, const void* bias, void* z, void* y, std::int64_t n,
              std::int64_t width, Stream stream);

}  // namespace meshflow::runtime::cuda
