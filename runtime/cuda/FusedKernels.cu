// The fused kernels of FusedKernels.h: a block per row for softmax's
// backward (as softmaxGrad), grid-stride loops for bias + GeLU and chains.
#include <stdexcept>

#include "runtime/cuda/FusedKernels.h"
#include "runtime/cuda/KernelSupport.cuh"

namespace meshflow::runtime::cuda {
namespace {

// SoftmaxGrad's value rounded to F, CausalMaskGrad's 0 above the diagonal,
// Scale's product rounded to F.
template <FloatFormat F>
__global__ void scaledMaskedSoftmaxGradKernel(const void* y, const void* dy, void* dx,
                                              std::int64_t rows, std::int64_t width, float scale,
                                              bool causal) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * width;
    const std::int64_t kept = causal ? r % width + 1 : width;
    double dot = 0;
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x)
      dot += static_cast<double>(loadAs<F>(y, base + j)) * loadAs<F>(dy, base + j);
    dot = blockSum(dot);
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      const float v = j < kept ? roundAs<F>(static_cast<float>(loadAs<F>(y, base + j) *
                                                               (loadAs<F>(dy, base + j) - dot)))
                               : 0.0f;
      storeAs<F>(dx, base + j, v * scale);
    }
  }
}

// The Add's sum rounded to F (what Gelu reads), GeLU of it.
template <FloatFormat F>
__global__ void biasGeluKernel(const void* x, const void* bias, void* z, void* y, std::int64_t n,
                               std::int64_t width) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float sum = roundAs<F>(loadAs<F>(x, i) + loadAs<F>(bias, i % width));
    if (z) storeAs<F>(z, i, sum);
    storeAs<F>(y, i, geluOf(sum));
  }
}

template <FloatFormat F>
__global__ void chainKernel(ElementwiseChain c, void* y, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    std::int64_t offset[kMaxChainInputs] = {};
    std::int64_t rest = i;
    for (int d = c.rank - 1; d >= 0; --d) {
      const std::int64_t coordinate = rest % c.shape[d];
      rest /= c.shape[d];
      for (int k = 0; k < c.operands; ++k) offset[k] += coordinate * c.strides[k][d];
    }
    float v = loadAs<F>(c.operand[0], offset[0]);
    for (int s = 0; s < c.steps; ++s) {
      const ChainKernelStep& step = c.step[s];
      float r;
      if (step.binary) {
        const float w = loadAs<F>(c.operand[step.other], offset[step.other]);
        r = step.chainOnRight ? binaryOf(step.binaryKind, w, v) : binaryOf(step.binaryKind, v, w);
      } else {
        r = unaryOf(step.unaryKind, v, step.factor);
      }
      v = roundAs<F>(r);
    }
    storeAs<F>(y, i, v);
  }
}

}  // namespace

void elementwiseChain(FloatFormat format, const ElementwiseChain& chain, void* y, std::int64_t n,
                      Stream stream) {
  detail::checkElementwise("elementwiseChain", n, 1);
  if (chain.steps < 1 || chain.steps > static_cast<int>(kMaxChainSteps) || chain.operands < 1 ||
      chain.operands > static_cast<int>(kMaxChainInputs) || chain.rank < 0 || chain.rank > kMaxRank)
    throw std::invalid_argument("cuda::elementwiseChain: steps, operands or rank out of range");
  for (int s = 0; s < chain.steps; ++s)
    if (chain.step[s].binary && (chain.step[s].other < 0 || chain.step[s].other >= chain.operands))
      throw std::invalid_argument(
          "cuda::elementwiseChain: a step reads an operand the chain does not have");
  for (int k = 0; k < chain.operands; ++k)
    detail::checkPointers("elementwiseChain", n, {chain.operand[k]});
  detail::checkPointers("elementwiseChain", n, {y});
  if (n == 0) return;
  withFormat(format,
             [&](auto f) { chainKernel<f()><<<blocksFor(n), kThreads, 0, stream>>>(chain, y, n); });
  checkLaunch();
}

void scaledMaskedSoftmaxGrad(FloatFormat format, const void* y, const void* dy, void* dx,
                             std::int64_t rows, std::int64_t width, float scale, bool causal,
                             Stream stream) {
  detail::checkRows("scaledMaskedSoftmaxGrad", rows, width, causal);
  detail::checkPointers("scaledMaskedSoftmaxGrad", rows * width, {y, dy, dx});
  if (rows * width == 0) return;
  withFormat(format, [&](auto f) {
    scaledMaskedSoftmaxGradKernel<f()>
        <<<rowBlocks(rows), kThreads, 0, stream>>>(y, dy, dx, rows, width, scale, causal);
  });
  checkLaunch();
}

void biasGelu(FloatFormat format, const void* x, const void* bias, void* z, void* y, std::int64_t n,
              std::int64_t width, Stream stream) {
  detail::checkElementwise("biasGelu", n, width);
  detail::checkPointers("biasGelu", n, {x, bias, y});
  if (n == 0) return;
  withFormat(format, [&](auto f) {
    biasGeluKernel<f()><<<blocksFor(n), kThreads, 0, stream>>>(x, bias, z, y, n, width);
  });
  checkLaunch();
}

}  // namespace meshflow::runtime::cuda
