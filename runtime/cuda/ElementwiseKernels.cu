// Element-wise kernels of TrainingKernels.h: broadcasting binary ops, unary
// activations and their gradients, dropout and the causal mask. Grid-stride
// loops, one element a thread.
#include <stdexcept>

#include "runtime/cuda/IndexMerge.h"
#include "runtime/cuda/KernelSupport.cuh"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {
namespace {

template <class Index, FloatFormat F>
__global__ void broadcastKernel(BinaryKind kind, const void* a, const void* b, void* y, BroadcastIndex ix, Index n) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    Index rest = i, offA = 0, offB = 0;
    for (int d = ix.rank - 1; d >= 0; --d) {
      const Index extent = Index(ix.shape[d]);
      const Index coordinate = rest % extent;
      rest /= extent;
      offA += coordinate * Index(ix.stridesA[d]);
      offB += coordinate * Index(ix.stridesB[d]);
    }
    storeAs<F>(y, i, binaryOf(kind, loadAs<F>(a, offA), loadAs<F>(b, offB)));
  }
}

template <FloatFormat F>
__global__ void unaryKernel(UnaryKind kind, const void* x, void* y, std::int64_t n, float factor) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) storeAs<F>(y, i, unaryOf(kind, loadAs<F>(x, i), factor));
}

template <FloatFormat F>
__global__ void unaryGradKernel(UnaryGradKind kind, const void* v, const void* dy, void* dx, std::int64_t n) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float x = loadAs<F>(v, i);
    float f = 0;
    switch (kind) {
      case UnaryGradKind::kRelu: f = x > 0 ? 1.0f : 0.0f; break;
      case UnaryGradKind::kGelu: f = geluDerivative(x); break;
      case UnaryGradKind::kTanh: f = 1.0f - x * x; break;
      case UnaryGradKind::kSigmoid: f = x * (1.0f - x); break;
    }
    storeAs<F>(dx, i, loadAs<F>(dy, i) * f);
  }
}

// cpu::dropoutKeep's hash: the splitmix64 finaliser over (seed, op, step, index).
__host__ __device__ std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

template <FloatFormat F>
__global__ void dropoutKernel(const void* x, void* y, std::int64_t n, std::uint64_t prefix,
                              std::uint64_t elementOffset, double p, float scale) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    const std::uint64_t h = mix(prefix ^ (elementOffset + static_cast<std::uint64_t>(i)));
    const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
    storeAs<F>(y, i, u >= p ? loadAs<F>(x, i) * scale : 0.0f);
  }
}

template <class Index, FloatFormat F>
__global__ void causalMaskKernel(const void* x, void* y, Index n, Index s, float fill) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += Index(gridDim.x) * blockDim.x) {
    const Index column = i % s, row = (i / s) % s;
    storeAs<F>(y, i, column <= row ? loadAs<F>(x, i) : fill);
  }
}

// 32-bit index arithmetic (several times cheaper on a GPU than 64-bit
// division) when every index fits.
constexpr std::int64_t k32 = std::int64_t(1) << 31;

}  // namespace

BroadcastIndex simplified(const BroadcastIndex& index) {
  return mergedDimensions(index, &BroadcastIndex::shape, &BroadcastIndex::stridesA, &BroadcastIndex::stridesB);
}

void broadcastBinary(BinaryKind kind, FloatFormat format, const void* a, const void* b, void* y,
                     const BroadcastIndex& index, Stream stream) {
  if (index.rank < 0 || index.rank > kMaxRank)
    throw std::invalid_argument("cuda::broadcastBinary: rank outside [0, 8]");
  std::int64_t n = 1;
  for (int d = 0; d < index.rank; ++d) n *= index.shape[static_cast<std::size_t>(d)];
  detail::checkElementwise("broadcastBinary", n, 1);
  detail::checkPointers("broadcastBinary", n, {a, b, y});
  if (n == 0) return;
  const BroadcastIndex ix = simplified(index);
  std::int64_t reachA = 1, reachB = 1;
  for (int d = 0; d < ix.rank; ++d) {
    reachA += (ix.shape[d] - 1) * ix.stridesA[d];
    reachB += (ix.shape[d] - 1) * ix.stridesB[d];
  }
  const bool narrow = n < k32 && reachA < k32 && reachB < k32;
  withFormat(format, [&](auto f) {
    if (narrow)
      broadcastKernel<std::uint32_t, f()><<<blocksFor(n), kThreads, 0, stream>>>(kind, a, b, y, ix, std::uint32_t(n));
    else
      broadcastKernel<std::int64_t, f()><<<blocksFor(n), kThreads, 0, stream>>>(kind, a, b, y, ix, n);
  });
  checkLaunch();
}

void broadcastBinary(BinaryKind kind, const float* a, const float* b, float* y, const BroadcastIndex& index,
                     Stream stream) {
  broadcastBinary(kind, FloatFormat::kF32, a, b, y, index, stream);
}

void unary(UnaryKind kind, FloatFormat format, const void* x, void* y, std::int64_t n, float factor, Stream stream) {
  detail::checkElementwise("unary", n, 1);
  detail::checkPointers("unary", n, {x, y});
  if (n == 0) return;
  withFormat(format, [&](auto f) { unaryKernel<f()><<<blocksFor(n), kThreads, 0, stream>>>(kind, x, y, n, factor); });
  checkLaunch();
}

void unary(UnaryKind kind, const float* x, float* y, std::int64_t n, float factor, Stream stream) {
  unary(kind, FloatFormat::kF32, x, y, n, factor, stream);
}

void unaryGrad(UnaryGradKind kind, FloatFormat format, const void* v, const void* dy, void* dx, std::int64_t n,
               Stream stream) {
  detail::checkElementwise("unaryGrad", n, 1);
  detail::checkPointers("unaryGrad", n, {v, dy, dx});
  if (n == 0) return;
  withFormat(format, [&](auto f) { unaryGradKernel<f()><<<blocksFor(n), kThreads, 0, stream>>>(kind, v, dy, dx, n); });
  checkLaunch();
}

void unaryGrad(UnaryGradKind kind, const float* v, const float* dy, float* dx, std::int64_t n, Stream stream) {
  unaryGrad(kind, FloatFormat::kF32, v, dy, dx, n, stream);
}

void dropout(FloatFormat format, const void* x, void* y, std::int64_t n, std::uint64_t seed, std::uint64_t opIndex,
             std::int64_t step, std::uint64_t elementOffset, double p, Stream stream) {
  detail::checkElementwise("dropout", n, 1);
  detail::checkPointers("dropout", n, {x, y});
  if (!(p >= 0 && p <= 1)) throw std::invalid_argument("cuda::dropout: p is not a probability");
  if (n == 0) return;
  // The hash's first three rounds depend on no element: done once here, as
  // cpu::dropoutKeep does them per element.
  std::uint64_t prefix = mix(mix(mix(seed) ^ opIndex) ^ static_cast<std::uint64_t>(step));
  const float scale = p < 1 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  withFormat(format, [&](auto f) {
    dropoutKernel<f()><<<blocksFor(n), kThreads, 0, stream>>>(x, y, n, prefix, elementOffset, p, scale);
  });
  checkLaunch();
}

void dropout(const float* x, float* y, std::int64_t n, std::uint64_t seed, std::uint64_t opIndex, std::int64_t step,
             std::uint64_t elementOffset, double p, Stream stream) {
  dropout(FloatFormat::kF32, x, y, n, seed, opIndex, step, elementOffset, p, stream);
}

void causalMask(FloatFormat format, const void* x, void* y, std::int64_t matrices, std::int64_t s, float fill,
                Stream stream) {
  const std::int64_t n = matrices * s * s;
  detail::checkElementwise("causalMask", n, 1);
  detail::checkPointers("causalMask", n, {x, y});
  if (n == 0) return;
  withFormat(format, [&](auto f) {
    if (n < k32)
      causalMaskKernel<std::uint32_t, f()>
          <<<blocksFor(n), kThreads, 0, stream>>>(x, y, std::uint32_t(n), std::uint32_t(s), fill);
    else
      causalMaskKernel<std::int64_t, f()><<<blocksFor(n), kThreads, 0, stream>>>(x, y, n, s, fill);
  });
  checkLaunch();
}

void causalMask(const float* x, float* y, std::int64_t matrices, std::int64_t s, float fill, Stream stream) {
  causalMask(FloatFormat::kF32, x, y, matrices, s, fill, stream);
}

}  // namespace meshflow::runtime::cuda
