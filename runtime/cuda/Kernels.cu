// The CUDA kernels of Kernels.h. Element-wise kernels are grid-stride loops;
// row kernels (softmax, layer norm) give each row one block, whose threads
// stride the row and combine through warp shuffles.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/Kernels.h"

namespace meshflow::runtime::cuda {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535LL * 16;

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi), as the cpu kernel's
constexpr float kGeluA = 0.044715f;

int blocksFor(std::int64_t work) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min(kMaxBlocks, (work + kThreads - 1) / kThreads)));
}

int rowBlocks(std::int64_t rows) { return static_cast<int>(std::max<std::int64_t>(1, std::min(kMaxBlocks, rows))); }

__device__ std::int64_t firstIndex() { return std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ std::int64_t gridStride() { return std::int64_t(gridDim.x) * blockDim.x; }

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

__device__ float geluOf(float x) { return 0.5f * x * (1.0f + tanhf(kGeluC * (x + kGeluA * x * x * x))); }

__device__ float geluDerivative(float x) {
  float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
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

__device__ float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ double warpSum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Every thread of the block gets the result. Blocks have kThreads threads.
__device__ float blockMax(float v) {
  __shared__ float partial[kThreads / 32];
  __shared__ float result;
  v = warpMax(v);
  __syncthreads();  // a previous call may still read `result`
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = warpMax(threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : -INFINITY);
    if (threadIdx.x == 0) result = v;
  }
  __syncthreads();
  return result;
}

__device__ double blockSum(double v) {
  __shared__ double partial[kThreads / 32];
  __shared__ double result;
  v = warpSum(v);
  __syncthreads();
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = warpSum(threadIdx.x < kThreads / 32 ? partial[threadIdx.x] : 0.0);
    if (threadIdx.x == 0) result = v;
  }
  __syncthreads();
  return result;
}

// As the cpu chain: the scaled score x·scale in fp32, entries above the
// diagonal weigh 0 (the cpu mask's -1e9 gives exp(-1e9 - max) = 0), exp of
// the score minus the row's maximum, the sum in double, one fp32 reciprocal.
__global__ void softmaxKernel(const float* x, float* y, std::int64_t rows, std::int64_t width, float scale,
                              bool causal) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * width;
    float* out = y + r * width;
    const std::int64_t kept = causal ? r % width + 1 : width;
    float max = -INFINITY;
    for (std::int64_t j = threadIdx.x; j < kept; j += blockDim.x) max = fmaxf(max, in[j] * scale);
    max = blockMax(max);
    double sum = 0;
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      float e = j < kept ? expf(in[j] * scale - max) : 0.0f;
      out[j] = e;
      sum += e;
    }
    const auto inverse = static_cast<float>(1.0 / blockSum(sum));
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) out[j] *= inverse;
  }
}

__global__ void layerNormKernel(const float* x, const float* gamma, const float* beta, float* y,
                                std::int64_t rows, std::int64_t width, double eps) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * width;
    float* out = y + r * width;
    double sum = 0;
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) sum += in[j];
    const double mean = blockSum(sum) / static_cast<double>(width);
    double squares = 0;
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) squares += (in[j] - mean) * (in[j] - mean);
    const double rstd = 1.0 / sqrt(blockSum(squares) / static_cast<double>(width) + eps);
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x)
      out[j] = static_cast<float>((in[j] - mean) * rstd * gamma[j] + beta[j]);
  }
}

void checkLaunch() { MESHFLOW_CUDA_CHECK(cudaGetLastError()); }

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

void softmax(const float* x, float* y, std::int64_t rows, std::int64_t width, float scale, bool causal,
             Stream stream) {
  detail::checkRows("softmax", rows, width, causal);
  detail::checkPointers("softmax", rows * width, {x, y});
  if (rows * width == 0) return;
  softmaxKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(x, y, rows, width, scale, causal);
  checkLaunch();
}

void layerNorm(const float* x, const float* gamma, const float* beta, float* y, std::int64_t rows,
               std::int64_t width, double eps, Stream stream) {
  detail::checkRows("layerNorm", rows, width, false);
  detail::checkPointers("layerNorm", rows * width, {x, gamma, beta, y});
  if (rows * width == 0) return;
  layerNormKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(x, gamma, beta, y, rows, width, eps);
  checkLaunch();
}

}  // namespace meshflow::runtime::cuda
