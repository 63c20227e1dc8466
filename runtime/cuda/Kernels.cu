// The CUDA kernels of Kernels.h. Element-wise kernels are grid-stride loops;
// row kernels (softmax, layer norm) give each row one block, whose threads
// stride the row and combine through warp shuffles.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "runtime/cuda/KernelSupport.cuh"
#include "runtime/cuda/Kernels.h"

namespace meshflow::runtime::cuda {
namespace {

struct AddOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct MulOp {
  __device__ float operator()(float a, float b) const { return a * b; }
};

template <class Op>
__global__ void binaryKernel(const float* a, const float* b, float* y, std::int64_t n, std::int64_t nb, Op op) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) y[i] = op(a[i], b[i % nb]);
}

__global__ void reluKernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) y[i] = x[i] > 0 ? x[i] : 0.0f;
}

__global__ void reluGradKernel(const float* x, const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) dx[i] = dy[i] * (x[i] > 0 ? 1.0f : 0.0f);
}

__global__ void geluKernel(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) y[i] = geluOf(x[i]);
}

__global__ void geluGradKernel(const float* x, const float* dy, float* dx, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) dx[i] = dy[i] * geluDerivative(x[i]);
}

// As the cpu chain: the scaled score x·scale in fp32, rounded to F as Scale
// stores it (the same value for scale 1), entries above the diagonal weigh 0 (the cpu mask's -1e9 gives exp(-1e9 - max) = 0), exp of
// the score minus the row's maximum, the sum in double, one fp32 reciprocal;
// each exp is computed again for the output (the same value), so a half
// output is rounded once, from the f32 product.
template <FloatFormat F>
__global__ void softmaxKernel(const void* x, void* y, std::int64_t rows, std::int64_t width, float scale,
                              bool causal) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * width;
    const std::int64_t kept = causal ? r % width + 1 : width;
    float max = -INFINITY;
    for (std::int64_t j = threadIdx.x; j < kept; j += blockDim.x) max = fmaxf(max, roundAs<F>(loadAs<F>(x, base + j) * scale));
    max = blockMax(max);
    double sum = 0;
    for (std::int64_t j = threadIdx.x; j < kept; j += blockDim.x) sum += expf(roundAs<F>(loadAs<F>(x, base + j) * scale) - max);
    const auto inverse = static_cast<float>(1.0 / blockSum(sum));
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      const float e = j < kept ? expf(roundAs<F>(loadAs<F>(x, base + j) * scale) - max) : 0.0f;
      storeAs<F>(y, base + j, e * inverse);
    }
  }
}

// Every operand stored as F; the moments in double, each output computed in
// double, rounded to f32 and then to F: the f32 kernel's value rounded as
// widening would round it.
template <FloatFormat F>
__global__ void layerNormKernel(const void* x, const void* gamma, const void* beta, void* y, std::int64_t rows,
                                std::int64_t width, double eps) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * width;
    const auto [mean, rstd] = rowMoments<F>(x, base, width, eps);
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x)
      storeAs<F>(y, base + j,
                 static_cast<float>((loadAs<F>(x, base + j) - mean) * rstd * loadAs<F>(gamma, j) + loadAs<F>(beta, j)));
  }
}

}  // namespace

void add(const float* a, const float* b, float* y, std::int64_t n, std::int64_t nb, Stream stream) {
  detail::checkElementwise("add", n, nb);
  detail::checkPointers("add", n, {a, b, y});
  if (n == 0) return;
  binaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(a, b, y, n, nb, AddOp{});
  checkLaunch();
}

void mul(const float* a, const float* b, float* y, std::int64_t n, std::int64_t nb, Stream stream) {
  detail::checkElementwise("mul", n, nb);
  detail::checkPointers("mul", n, {a, b, y});
  if (n == 0) return;
  binaryKernel<<<blocksFor(n), kThreads, 0, stream>>>(a, b, y, n, nb, MulOp{});
  checkLaunch();
}

void relu(const float* x, float* y, std::int64_t n, Stream stream) {
  detail::checkElementwise("relu", n, 1);
  detail::checkPointers("relu", n, {x, y});
  if (n == 0) return;
  reluKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
  checkLaunch();
}

void reluGrad(const float* x, const float* dy, float* dx, std::int64_t n, Stream stream) {
  detail::checkElementwise("reluGrad", n, 1);
  detail::checkPointers("reluGrad", n, {x, dy, dx});
  if (n == 0) return;
  reluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, dy, dx, n);
  checkLaunch();
}

void gelu(const float* x, float* y, std::int64_t n, Stream stream) {
  detail::checkElementwise("gelu", n, 1);
  detail::checkPointers("gelu", n, {x, y});
  if (n == 0) return;
  geluKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, y, n);
  checkLaunch();
}

void geluGrad(const float* x, const float* dy, float* dx, std::int64_t n, Stream stream) {
  detail::checkElementwise("geluGrad", n, 1);
  detail::checkPointers("geluGrad", n, {x, dy, dx});
  if (n == 0) return;
  geluGradKernel<<<blocksFor(n), kThreads, 0, stream>>>(x, dy, dx, n);
  checkLaunch();
}

void softmax(FloatFormat format, const void* x, void* y, std::int64_t rows, std::int64_t width, float scale,
             bool causal, Stream stream) {
  detail::checkRows("softmax", rows, width, causal);
  detail::checkPointers("softmax", rows * width, {x, y});
  if (rows * width == 0) return;
  withFormat(format, [&](auto f) {
    softmaxKernel<f()><<<rowBlocks(rows), kThreads, 0, stream>>>(x, y, rows, width, scale, causal);
  });
  checkLaunch();
}

void softmax(const float* x, float* y, std::int64_t rows, std::int64_t width, float scale, bool causal,
             Stream stream) {
  softmax(FloatFormat::kF32, x, y, rows, width, scale, causal, stream);
}

void layerNorm(FloatFormat format, const void* x, const void* gamma, const void* beta, void* y, std::int64_t rows,
               std::int64_t width, double eps, Stream stream) {
  detail::checkRows("layerNorm", rows, width, false);
  detail::checkPointers("layerNorm", rows * width, {x, gamma, beta, y});
  if (rows * width == 0) return;
  withFormat(format, [&](auto f) {
    layerNormKernel<f()><<<rowBlocks(rows), kThreads, 0, stream>>>(x, gamma, beta, y, rows, width, eps);
  });
  checkLaunch();
}

void layerNorm(const float* x, const float* gamma, const float* beta, float* y, std::int64_t rows,
               std::int64_t width, double eps, Stream stream) {
  layerNorm(FloatFormat::kF32, x, gamma, beta, y, rows, width, eps, stream);
}

}  // namespace meshflow::runtime::cuda
