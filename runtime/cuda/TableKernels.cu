// Embedding lookups and their scatter-add gradient, sums over rows (bias
// gradients) and the optimizer's kernels: sums of squares for the global norm
// and the SGD and Adam updates in place.
#include <stdexcept>

#include "runtime/cuda/KernelSupport.cuh"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {
namespace {

__global__ void embeddingKernel(const float* table, const std::int32_t* ids, float* y, std::int64_t n,
                                std::int64_t h) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) y[i] = table[std::int64_t(ids[i / h]) * h + i % h];
}

// A thread per column of the table: positions in order, so a repeated id
// sums as the cpu kernel's loop does (fp32), and no two threads touch one element.
__global__ void embeddingGradKernel(const std::int32_t* ids, const float* dy, float* dtable, std::int64_t positions,
                                    std::int64_t h) {
  for (std::int64_t j = firstIndex(); j < h; j += gridStride())
    for (std::int64_t p = 0; p < positions; ++p) dtable[std::int64_t(ids[p]) * h + j] += dy[p * h + j];
}

__global__ void sumRowsKernel(const float* x, float* y, std::int64_t rows, std::int64_t width) {
  for (std::int64_t j = firstIndex(); j < width; j += gridStride()) {
    double sum = 0;
    for (std::int64_t r = 0; r < rows; ++r) sum += x[r * width + j];
    y[j] = static_cast<float>(sum);
  }
}

__global__ void addSquaresKernel(const float* x, std::int64_t n, double* sumSquares) {
  double sum = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += static_cast<double>(x[i]) * x[i];
  sum = blockSum(sum);
  if (threadIdx.x == 0) *sumSquares += sum;
}

__global__ void sqrtKernel(const double* sumSquares, float* y) { *y = static_cast<float>(sqrt(*sumSquares)); }

__global__ void sgdKernel(const float* w, const float* g, const float* scale, const float* m, float* wOut,
                          float* mOut, std::int64_t n, SgdConstants k) {
  const float s = *scale;
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float gi = g[i] * s + k.decay * w[i];
    const float mi = k.momentum * m[i] + gi;
    const float wi = w[i] - k.lr * mi;
    mOut[i] = mi;
    wOut[i] = wi;
  }
}

__global__ void adamKernel(const float* w, const float* g, const float* scale, const float* m, const float* v,
                           float* wOut, float* mOut, float* vOut, std::int64_t n, AdamConstants k) {
  const float s = *scale;
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float wi = w[i];
    const float gi = g[i] * s + (k.decoupled ? 0.0f : k.decay * wi);
    const float mi = k.beta1 * m[i] + (1.0f - k.beta1) * gi;
    const float vi = k.beta2 * v[i] + (1.0f - k.beta2) * gi * gi;
    float step = (mi / k.correction1) / (sqrtf(vi / k.correction2) + k.eps);
    if (k.decoupled) step += k.decay * wi;
    mOut[i] = mi;
    vOut[i] = vi;
    wOut[i] = wi - k.lr * step;
  }
}

}  // namespace

void embedding(const float* table, const std::int32_t* ids, float* y, std::int64_t positions, std::int64_t h,
               Stream stream) {
  const std::int64_t n = positions * h;
  detail::checkElementwise("embedding", n, 1);
  detail::checkPointers("embedding", n, {table, ids, y});
  if (n == 0) return;
  embeddingKernel<<<blocksFor(n), kThreads, 0, stream>>>(table, ids, y, n, h);
  checkLaunch();
}

void embeddingGrad(const std::int32_t* ids, const float* dy, float* dtable, std::int64_t positions,
                   std::int64_t vocab, std::int64_t h, Stream stream) {
  detail::checkElementwise("embeddingGrad", vocab * h, 1);
  detail::checkPointers("embeddingGrad", vocab * h, {dtable});
  detail::checkPointers("embeddingGrad", positions * h, {ids, dy});
  if (vocab * h == 0) return;
  MESHFLOW_CUDA_CHECK(cudaMemsetAsync(dtable, 0, sizeof(float) * static_cast<std::size_t>(vocab * h), stream));
  if (positions == 0) return;
  embeddingGradKernel<<<blocksFor(h), kThreads, 0, stream>>>(ids, dy, dtable, positions, h);
  checkLaunch();
}

void sumRows(const float* x, float* y, std::int64_t rows, std::int64_t width, Stream stream) {
  detail::checkRows("sumRows", rows, width, false);
  detail::checkPointers("sumRows", width, {x, y});
  if (width == 0) return;
  sumRowsKernel<<<blocksFor(width), kThreads, 0, stream>>>(x, y, rows, width);
  checkLaunch();
}

void addSquares(const float* x, std::int64_t n, double* sumSquares, Stream stream) {
  detail::checkElementwise("addSquares", n, 1);
  detail::checkPointers("addSquares", n, {x, sumSquares});
  if (n == 0) return;
  addSquaresKernel<<<1, kThreads, 0, stream>>>(x, n, sumSquares);
  checkLaunch();
}

void sqrtToFloat(const double* sumSquares, float* y, Stream stream) {
  detail::checkPointers("sqrtToFloat", 1, {sumSquares, y});
  sqrtKernel<<<1, 1, 0, stream>>>(sumSquares, y);
  checkLaunch();
}

void sgdUpdate(const float* w, const float* g, const float* scale, const float* m, float* wOut, float* mOut,
               std::int64_t n, SgdConstants k, Stream stream) {
  detail::checkElementwise("sgdUpdate", n, 1);
  detail::checkPointers("sgdUpdate", n, {w, g, scale, m, wOut, mOut});
  if (n == 0) return;
  sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(w, g, scale, m, wOut, mOut, n, k);
  checkLaunch();
}

void adamUpdate(const float* w, const float* g, const float* scale, const float* m, const float* v, float* wOut,
                float* mOut, float* vOut, std::int64_t n, AdamConstants k, Stream stream) {
  detail::checkElementwise("adamUpdate", n, 1);
  detail::checkPointers("adamUpdate", n, {w, g, scale, m, v, wOut, mOut, vOut});
  if (n == 0) return;
  adamKernel<<<blocksFor(n), kThreads, 0, stream>>>(w, g, scale, m, v, wOut, mOut, vOut, n, k);
  checkLaunch();
}

}  // namespace meshflow::runtime::cuda
