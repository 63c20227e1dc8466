// Embedding lookups and their scatter-add gradient, sums over rows (bias
// gradients) and the optimizer's kernels: sums of squares for the global norm
// and the SGD and Adam updates in place. Operands of any float format, read
// as f32 and each result rounded once (KernelSupport.cuh's loadAs/storeAs).
#include <stdexcept>

#include "runtime/cuda/ChunkSums.h"
#include "runtime/cuda/KernelSupport.cuh"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {
namespace {

// Rows of the table copied (a half table's elements as they are).
template <FloatFormat F>
__global__ void embeddingKernel(const void* table, const std::int32_t* ids, void* y, std::int64_t n, std::int64_t h) {
  for (std::int64_t i = firstIndex(); i < n; i += gridStride())
    storeAs<F>(y, i, loadAs<F>(table, std::int64_t(ids[i / h]) * h + i % h));
}

// Thread (g, j): id group g's rows of dy summed in position order (fp32, as
// the cpu kernel's loop), column j; no two threads touch one element.
template <FloatFormat FD, FloatFormat FT>
__global__ void embeddingGradKernel(const std::int32_t* order, const std::int32_t* starts, const std::int32_t* ids,
                                    std::int64_t groups, const void* dy, void* dtable, std::int64_t h) {
  for (std::int64_t t = firstIndex(); t < groups * h; t += gridStride()) {
    const std::int64_t g = t / h, j = t % h;
    float sum = 0.0f;
    for (std::int32_t k = starts[g]; k < starts[g + 1]; ++k) sum += loadAs<FD>(dy, std::int64_t(order[k]) * h + j);
    storeAs<FT>(dtable, std::int64_t(ids[g]) * h + j, sum);
  }
}

// The summed elements [first, last) of output o (row-major over the summed
// dimensions), from its base offset, in x's format F.
template <FloatFormat F>
__device__ double sumRange(const void* x, const SumIndex& ix, std::int64_t base, std::int64_t first,
                           std::int64_t last) {
  std::int64_t at[kMaxRank] = {};
  std::int64_t offset = base, rest = first;
  for (int d = ix.summedRank - 1; d >= 0; --d) {
    at[d] = rest % ix.summed[d];
    rest /= ix.summed[d];
    offset += at[d] * ix.summedStrides[d];
  }
  double sum = 0;
  for (std::int64_t k = first; k < last; ++k) {
    sum += loadAs<F>(x, offset);
    for (int d = ix.summedRank - 1; d >= 0; --d) {  // an odometer: no division per element
      offset += ix.summedStrides[d];
      if (++at[d] < ix.summed[d]) break;
      offset -= ix.summedStrides[d] * ix.summed[d];
      at[d] = 0;
    }
  }
  return sum;
}

__device__ std::int64_t baseOf(const SumIndex& ix, std::int64_t o) {
  std::int64_t rest = o, base = 0;
  for (int d = ix.keptRank - 1; d >= 0; --d) {
    base += rest % ix.kept[d] * ix.keptStrides[d];
    rest /= ix.kept[d];
  }
  return base;
}

// y[o] = factor · Σ, rounded to f32 and then to y's format: what widening x,
// the f32 kernel and rounding its result back give.
template <FloatFormat F>
__global__ void sumOverKernel(const void* x, FloatFormat yFormat, void* y, SumIndex ix, std::int64_t outputs,
                              std::int64_t perOutput, double factor) {
  for (std::int64_t o = firstIndex(); o < outputs; o += gridStride())
    storeIn(yFormat, y, o, static_cast<float>(sumRange<F>(x, ix, baseOf(ix, o), 0, perOutput) * factor));
}

// Thread (c, o), c-major so that neighbouring threads read neighbouring outputs.
template <FloatFormat F>
__global__ void sumChunksKernel(const void* x, double* partial, SumIndex ix, std::int64_t outputs,
                                std::int64_t perOutput, std::int64_t chunks) {
  const std::int64_t length = (perOutput + chunks - 1) / chunks;
  for (std::int64_t t = firstIndex(); t < outputs * chunks; t += gridStride()) {
    const std::int64_t c = t / outputs, o = t % outputs;
    const std::int64_t first = c * length, last = first + length < perOutput ? first + length : perOutput;
    partial[t] = first < last ? sumRange<F>(x, ix, baseOf(ix, o), first, last) : 0.0;
  }
}

std::int64_t countOf(const std::int64_t* extents, int rank) {
  std::int64_t n = 1;
  for (int d = 0; d < rank; ++d) n *= extents[d];
  return n;
}

// Block b: Σ x[i]² (double) over i = b·kThreads + thread + k·blocks·kThreads,
// each thread in order, the block's threads by blockSum's tree: a fixed
// order for a given n (blocks depends on n alone, not on the GPU).
template <FloatFormat F>
__global__ void squaresKernel(const void* x, std::int64_t n, double* partial) {
  double sum = 0;
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    const double v = loadAs<F>(x, i);
    sum += v * v;
  }
  sum = blockSum(sum);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

// One block: *sumSquares += the blocks' partial sums, in a fixed order.
__global__ void addPartialsKernel(const double* partial, std::int64_t count, double* sumSquares) {
  const double sum = blockSumStrided(partial, count, 1);
  if (threadIdx.x == 0) *sumSquares += sum;
}

__global__ void sqrtKernel(const double* sumSquares, float* y, bool root) {
  *y = static_cast<float>(root ? sqrt(*sumSquares) : *sumSquares);
}

// Each operand read and each result stored in its own format (f32 in a
// training graph: the master weight, its gradient and state); the math in
// f32 as the cpu kernel's, each result rounded once. In place allowed: every
// element is read before it is written at the same index.
__global__ void sgdKernel(UpdateOperands u, const float* scale, std::int64_t n, SgdConstants k) {
  const float s = *scale;
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float wi = loadIn(u.formats.w, u.w, i);
    const float gi = loadIn(u.formats.g, u.g, i) * s + k.decay * wi;
    const float mi = k.momentum * loadIn(u.formats.m, u.m, i) + gi;
    storeIn(u.formats.mOut, u.mOut, i, mi);
    storeIn(u.formats.wOut, u.wOut, i, wi - k.lr * mi);
  }
}

__global__ void adamKernel(UpdateOperands u, const float* scale, std::int64_t n, AdamConstants k) {
  const float s = *scale;
  for (std::int64_t i = firstIndex(); i < n; i += gridStride()) {
    const float wi = loadIn(u.formats.w, u.w, i);
    const float gi = loadIn(u.formats.g, u.g, i) * s + (k.decoupled ? 0.0f : k.decay * wi);
    const float mi = k.beta1 * loadIn(u.formats.m, u.m, i) + (1.0f - k.beta1) * gi;
    const float vi = k.beta2 * loadIn(u.formats.v, u.v, i) + (1.0f - k.beta2) * gi * gi;
    float step = (mi / k.correction1) / (sqrtf(vi / k.correction2) + k.eps);
    if (k.decoupled) step += k.decay * wi;
    storeIn(u.formats.mOut, u.mOut, i, mi);
    storeIn(u.formats.vOut, u.vOut, i, vi);
    storeIn(u.formats.wOut, u.wOut, i, wi - k.lr * step);
  }
}

}  // namespace

void embedding(FloatFormat format, const void* table, const std::int32_t* ids, void* y, std::int64_t positions,
               std::int64_t h, Stream stream) {
  const std::int64_t n = positions * h;
  detail::checkElementwise("embedding", n, 1);
  detail::checkPointers("embedding", n, {table, ids, y});
  if (n == 0) return;
  withFormat(format, [&](auto f) { embeddingKernel<f()><<<blocksFor(n), kThreads, 0, stream>>>(table, ids, y, n, h); });
  checkLaunch();
}

void embedding(const float* table, const std::int32_t* ids, float* y, std::int64_t positions, std::int64_t h,
               Stream stream) {
  embedding(FloatFormat::kF32, table, ids, y, positions, h, stream);
}

void embeddingGrad(const std::int32_t* groups, std::int64_t count, FloatFormat dyFormat, const void* dy,
                   FloatFormat tableFormat, void* dtable, std::int64_t positions, std::int64_t vocab, std::int64_t h,
                   Stream stream) {
  detail::checkElementwise("embeddingGrad", vocab * h, 1);
  detail::checkElementwise("embeddingGrad", count * h, 1);
  if (count < 0 || count > positions) throw std::invalid_argument("cuda::embeddingGrad: more id groups than positions");
  detail::checkPointers("embeddingGrad", vocab * h, {dtable});
  detail::checkPointers("embeddingGrad", positions * h, {groups, dy});
  if (vocab * h == 0) return;
  const std::size_t element = tableFormat == FloatFormat::kF32 ? sizeof(float) : sizeof(std::uint16_t);
  MESHFLOW_CUDA_CHECK(cudaMemsetAsync(dtable, 0, element * static_cast<std::size_t>(vocab * h), stream));
  if (count == 0 || h == 0) return;
  const std::int32_t* starts = groups + positions;
  withFormat(dyFormat, [&](auto fd) {
    withFormat(tableFormat, [&](auto ft) {
      embeddingGradKernel<fd(), ft()><<<blocksFor(count * h), kThreads, 0, stream>>>(groups, starts, starts + count + 1,
                                                                                     count, dy, dtable, h);
    });
  });
  checkLaunch();
}

std::int64_t sumOverScratch(const SumIndex& index) {
  const std::int64_t outputs = countOf(index.kept, index.keptRank);
  const std::int64_t chunks = chunksFor(outputs, countOf(index.summed, index.summedRank));
  return chunks > 1 ? chunks * outputs : 0;
}

void sumOver(FloatFormat xFormat, const void* x, FloatFormat yFormat, void* y, const SumIndex& index, double factor,
             double* scratch, Stream stream) {
  if (index.keptRank < 0 || index.keptRank > kMaxRank || index.summedRank < 0 || index.summedRank > kMaxRank)
    throw std::invalid_argument("cuda::sumOver: rank outside [0, 8]");
  const std::int64_t outputs = countOf(index.kept, index.keptRank);
  const std::int64_t perOutput = countOf(index.summed, index.summedRank);
  detail::checkElementwise("sumOver", outputs, 1);
  detail::checkPointers("sumOver", outputs, {y});
  detail::checkPointers("sumOver", outputs * perOutput, {x});
  if (outputs == 0) return;
  const std::int64_t chunks = chunksFor(outputs, perOutput);
  if (chunks > 1 && !scratch) throw std::invalid_argument("cuda::sumOver: needs sumOverScratch(index) doubles of scratch");
  withFormat(xFormat, [&](auto f) {
    if (chunks > 1)
      sumChunksKernel<f()><<<blocksFor(outputs * chunks), kThreads, 0, stream>>>(x, scratch, index, outputs,
                                                                                 perOutput, chunks);
    else
      sumOverKernel<f()><<<blocksFor(outputs), kThreads, 0, stream>>>(x, yFormat, y, index, outputs, perOutput,
                                                                      factor);
  });
  checkLaunch();
  if (chunks == 1) return;
  ChunkSums sums;  // output o's chunk c at scratch[c · outputs + o] (sumChunksKernel)
  sums.partial = scratch;
  sums.outputStride = 1;
  sums.chunkStride = outputs;
  sums.outputs = outputs;
  sums.chunks = chunks;
  sums.factor = factor;
  sums.format = yFormat;
  sums.y = y;
  addChunks(sums, stream);
}

std::int64_t addSquaresScratch(std::int64_t n) {
  constexpr std::int64_t kPerThread = 64, kMostBlocks = 1024;
  const std::int64_t blocks = (n + kThreads * kPerThread - 1) / (kThreads * kPerThread);
  return blocks < 1 ? 1 : blocks > kMostBlocks ? kMostBlocks : blocks;
}

void addSquares(FloatFormat format, const void* x, std::int64_t n, double* sumSquares, double* scratch,
                Stream stream) {
  detail::checkElementwise("addSquares", n, 1);
  detail::checkPointers("addSquares", n, {x, sumSquares, scratch});
  if (n == 0) return;
  const auto blocks = static_cast<int>(addSquaresScratch(n));
  withFormat(format, [&](auto f) { squaresKernel<f()><<<blocks, kThreads, 0, stream>>>(x, n, scratch); });
  checkLaunch();
  addPartialsKernel<<<1, kThreads, 0, stream>>>(scratch, blocks, sumSquares);
  checkLaunch();
}

void sqrtToFloat(const double* sumSquares, float* y, Stream stream, bool root) {
  detail::checkPointers("sqrtToFloat", 1, {sumSquares, y});
  sqrtKernel<<<1, 1, 0, stream>>>(sumSquares, y, root);
  checkLaunch();
}

void sgdUpdate(const UpdateOperands& u, const float* scale, std::int64_t n, SgdConstants k, Stream stream) {
  detail::checkElementwise("sgdUpdate", n, 1);
  detail::checkPointers("sgdUpdate", n, {u.w, u.g, scale, u.m, u.wOut, u.mOut});
  if (n == 0) return;
  sgdKernel<<<blocksFor(n), kThreads, 0, stream>>>(u, scale, n, k);
  checkLaunch();
}

void adamUpdate(const UpdateOperands& u, const float* scale, std::int64_t n, AdamConstants k, Stream stream) {
  detail::checkElementwise("adamUpdate", n, 1);
  detail::checkPointers("adamUpdate", n, {u.w, u.g, scale, u.m, u.v, u.wOut, u.mOut, u.vOut});
  if (n == 0) return;
  adamKernel<<<blocksFor(n), kThreads, 0, stream>>>(u, scale, n, k);
  checkLaunch();
}

}  // namespace meshflow::runtime::cuda
