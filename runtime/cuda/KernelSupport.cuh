// What the .cu kernel files share: launch sizes, grid-stride indices and
// block-wide reductions (every block has kThreads threads).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "runtime/HalfBits.h"
#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 65535LL * 16;

inline int blocksFor(std::int64_t work) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min(kMaxBlocks, (work + kThreads - 1) / kThreads)));
}

inline int rowBlocks(std::int64_t rows) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min(kMaxBlocks, rows)));
}

// Chunks for a sum of perOutput elements into `outputs` (a long sum into few
// outputs: bias, layer-norm and reduction gradients): enough threads to fill
// the GPU (about 2^18), each summing at least 64 elements; 1 when one thread
// per output fills it already. Chunks are added in order, so the result does
// not depend on the launch.
inline std::int64_t chunksFor(std::int64_t outputs, std::int64_t perOutput) {
  constexpr std::int64_t kThreadsWanted = 1 << 18, kLeast = 64;
  if (outputs == 0 || outputs >= kThreadsWanted / 4 || perOutput < 4 * kLeast) return 1;
  const std::int64_t byThreads = kThreadsWanted / outputs, byLength = perOutput / kLeast;
  return byThreads < byLength ? byThreads : byLength;
}

inline void checkLaunch() { MESHFLOW_CUDA_CHECK(cudaGetLastError()); }

__device__ inline std::int64_t firstIndex() { return std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ inline std::int64_t gridStride() { return std::int64_t(gridDim.x) * blockDim.x; }

// Element i of an array stored as F, as f32; and f32 v stored as F there
// (rounded to nearest even, as the host rounds: runtime/HalfBits.h).
template <FloatFormat F>
__device__ inline float loadAs(const void* p, std::int64_t i) {
  if constexpr (F == FloatFormat::kF16) return half_bits::f32FromHalf(static_cast<const std::uint16_t*>(p)[i]);
  else if constexpr (F == FloatFormat::kBF16) return half_bits::f32FromBFloat16(static_cast<const std::uint16_t*>(p)[i]);
  else return static_cast<const float*>(p)[i];
}

template <FloatFormat F>
__device__ inline void storeAs(void* p, std::int64_t i, float v) {
  if constexpr (F == FloatFormat::kF16) static_cast<std::uint16_t*>(p)[i] = half_bits::halfFromF32(half_bits::bitsOf(v));
  else if constexpr (F == FloatFormat::kBF16)
    static_cast<std::uint16_t*>(p)[i] = half_bits::bfloat16FromF32(half_bits::bitsOf(v));
  else static_cast<float*>(p)[i] = v;
}

// v stored as F and read back: the rounding an op's stored result gets.
template <FloatFormat F>
__device__ inline float roundAs(float v) {
  if constexpr (F == FloatFormat::kF16) return half_bits::f32FromHalf(half_bits::halfFromF32(half_bits::bitsOf(v)));
  else if constexpr (F == FloatFormat::kBF16)
    return half_bits::f32FromBFloat16(half_bits::bfloat16FromF32(half_bits::bitsOf(v)));
  else return v;
}

// The same for a format known only when the kernel runs (one branch, the
// same for every thread): for operands whose formats vary independently (an
// update's weight, gradient and state; a sum's result), where a template per
// combination would multiply the kernels.
__device__ inline float loadIn(FloatFormat f, const void* p, std::int64_t i) {
  switch (f) {
    case FloatFormat::kF16: return loadAs<FloatFormat::kF16>(p, i);
    case FloatFormat::kBF16: return loadAs<FloatFormat::kBF16>(p, i);
    default: return loadAs<FloatFormat::kF32>(p, i);
  }
}

__device__ inline void storeIn(FloatFormat f, void* p, std::int64_t i, float v) {
  switch (f) {
    case FloatFormat::kF16: return storeAs<FloatFormat::kF16>(p, i, v);
    case FloatFormat::kBF16: return storeAs<FloatFormat::kBF16>(p, i, v);
    default: return storeAs<FloatFormat::kF32>(p, i, v);
  }
}

// launch(std::integral_constant<FloatFormat, F>{}) for the F of `format`.
template <class Launch>
void withFormat(FloatFormat format, Launch launch) {
  switch (format) {
    case FloatFormat::kF16: return launch(std::integral_constant<FloatFormat, FloatFormat::kF16>{});
    case FloatFormat::kBF16: return launch(std::integral_constant<FloatFormat, FloatFormat::kBF16>{});
    default: return launch(std::integral_constant<FloatFormat, FloatFormat::kF32>{});
  }
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi), as the cpu kernel's
constexpr float kGeluA = 0.044715f;

// The cpu kernels' GeLU (tanh form) and its derivative, with CUDA's tanhf.
__device__ inline float geluOf(float x) { return 0.5f * x * (1.0f + tanhf(kGeluC * (x + kGeluA * x * x * x))); }

__device__ inline float geluDerivative(float x) {
  float t = tanhf(kGeluC * (x + kGeluA * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

// Two forms so exp never overflows, as the cpu kernel's.
__device__ inline float sigmoidOf(float x) {
  if (x >= 0) return 1.0f / (1.0f + expf(-x));
  const float e = expf(x);
  return e / (1.0f + e);
}

// One element of a binary op or an activation (Scale: times `factor`), in
// f32: what the element-wise kernels and an element-wise chain compute.
__device__ inline float binaryOf(BinaryKind kind, float u, float v) {
  switch (kind) {
    case BinaryKind::kAdd: return u + v;
    case BinaryKind::kSub: return u - v;
    case BinaryKind::kMul: return u * v;
    case BinaryKind::kDiv: return u / v;
  }
  return 0;
}

__device__ inline float unaryOf(UnaryKind kind, float v, float factor) {
  switch (kind) {
    case UnaryKind::kNeg: return -v;
    case UnaryKind::kRelu: return v > 0 ? v : 0.0f;
    case UnaryKind::kGelu: return geluOf(v);
    case UnaryKind::kTanh: return tanhf(v);
    case UnaryKind::kSigmoid: return sigmoidOf(v);
    case UnaryKind::kExp: return expf(v);
    case UnaryKind::kScale: return v * factor;
  }
  return 0;
}

__device__ inline float warpMax(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

__device__ inline double warpSum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Every thread of the block gets the result.
__device__ inline float blockMax(float v) {
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

__device__ inline double blockSum(double v) {
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

// A row's mean and 1/sqrt(variance + eps) (biased variance), in double, as
// the cpu layer norm computes them, from the `width` elements of x (stored as
// F) at `base`; every thread of the block gets them.
struct RowMoments {
  double mean, rstd;
};

template <FloatFormat F>
__device__ inline RowMoments rowMoments(const void* x, std::int64_t base, std::int64_t width, double eps) {
  double sum = 0;
  for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) sum += loadAs<F>(x, base + j);
  const double mean = blockSum(sum) / static_cast<double>(width);
  double squares = 0;
  for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) {
    const double centred = loadAs<F>(x, base + j) - mean;
    squares += centred * centred;
  }
  return {mean, 1.0 / sqrt(blockSum(squares) / static_cast<double>(width) + eps)};
}

// Σ partial[c · stride] over c < count, in a fixed order for every launch: the
// block's threads add every kThreads-th term in order, then blockSum's fixed
// tree adds their sums. For adding a long sum's chunks (many terms into one
// output) with a block instead of one thread; every thread gets the sum.
__device__ inline double blockSumStrided(const double* partial, std::int64_t count, std::int64_t stride) {
  double sum = 0;
  for (std::int64_t c = threadIdx.x; c < count; c += blockDim.x) sum += partial[c * stride];
  return blockSum(sum);
}

}  // namespace meshflow::runtime::cuda
