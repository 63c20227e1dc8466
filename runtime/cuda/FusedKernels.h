// The kernels of the fused groups (runtime/FusedOps.h) that Kernels.h's
// softmax(…, scale, causal, …) does not already cover: softmax's backward
// with the causal mask's and Scale's, bias + GeLU and element-wise chains. Each computes what
// the unfused chain of CUDA kernels computes, in the same order, rounding
// each intermediate to `format` where an op of the chain would store it:
// the chain's bits, in one launch and one pass over memory.
#pragma once

#include <cstdint>

#include "runtime/FusedLimits.h"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {

/// dx = scale · mask0(y · (dy − Σ y·dy)) per row of `width` (the dot over the
/// whole row, in double, as SoftmaxGrad's). `causal`: rows are [..., s, s]
/// and row i keeps its first i + 1 entries, the rest of dx is 0.
void scaledMaskedSoftmaxGrad(FloatFormat format, const void* y, const void* dy, void* dx,
                             std::int64_t rows, std::int64_t width, float scale, bool causal,
                             Stream stream);

/// z = x + bias (bias of `width` elements repeating along x's last dimension,
/// n a multiple of it), y = gelu(z). `z` may be null: not written.
void biasGelu(FloatFormat format, const void* x, const void* bias, void* z, void* y, std::int64_t n,
              std::int64_t width, Stream stream);

/// An element-wise chain (runtime::FusedPattern::kElementwise) as the GPU
/// walks it: per output element (row-major over `shape`), the value of
/// operand 0 at its broadcast offset, then each step in order — a binary op
/// with operand `other` (the chain's value on the right where chainOnRight)
/// or an activation — each result rounded to the format as the op would
/// store it.
struct ChainKernelStep {
  bool binary = false;
  BinaryKind binaryKind = BinaryKind::kAdd;
  UnaryKind unaryKind = UnaryKind::kNeg;
  float factor = 1;
  int other = -1;
  bool chainOnRight = false;
};

struct ElementwiseChain {
  int steps = 0, operands = 0, rank = 0;
  ChainKernelStep step[kMaxChainSteps];
  const void* operand[kMaxChainInputs] = {};
  std::int64_t shape[kMaxRank] = {};
  /// Per operand, the strides that read it while walking `shape` (0 along broadcast dimensions).
  std::int64_t strides[kMaxChainInputs][kMaxRank] = {};
};

/// y (n elements, `shape`'s) = the chain over its operands, all stored as `format`.
void elementwiseChain(FloatFormat format, const ElementwiseChain& chain, void* y, std::int64_t n,
                      Stream stream);

}  // namespace meshflow::runtime::cuda
