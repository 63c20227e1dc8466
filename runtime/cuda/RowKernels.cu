// Row kernels of TrainingKernels.h: softmax's and layer norm's backward and
// cross-entropy with its gradient. A block per row; its threads stride the
// row and combine through KernelSupport.cuh's block reductions.
#include <stdexcept>

#include "runtime/cuda/ChunkSums.h"
#include "runtime/cuda/KernelSupport.cuh"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {
namespace {

template <FloatFormat F>
__global__ void softmaxGradKernel(const void* y, const void* dy, void* dx, std::int64_t rows, std::int64_t width) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * width;
    double dot = 0;
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x)
      dot += static_cast<double>(loadAs<F>(y, base + j)) * loadAs<F>(dy, base + j);
    dot = blockSum(dot);
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x)
      storeAs<F>(dx, base + j, static_cast<float>(loadAs<F>(y, base + j) * (loadAs<F>(dy, base + j) - dot)));
  }
}

// dx per row, as the cpu kernel: rstd · (dxhat − mean(dxhat) − xhat · mean(dxhat · xhat)),
// x, gamma, dy and dx stored as F; each row's mean and rstd kept in `moments`.
template <FloatFormat F>
__global__ void layerNormGradRows(const void* x, const void* gamma, const void* dy, void* dx, std::int64_t rows,
                                  std::int64_t width, double eps, double* moments) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * width;
    const auto [mean, rstd] = rowMoments<F>(x, base, width, eps);
    double meanD = 0, meanDX = 0;
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      const double dxhat = static_cast<double>(loadAs<F>(dy, base + j)) * loadAs<F>(gamma, j);
      meanD += dxhat;
      meanDX += dxhat * ((loadAs<F>(x, base + j) - mean) * rstd);
    }
    meanD = blockSum(meanD) / static_cast<double>(width);
    meanDX = blockSum(meanDX) / static_cast<double>(width);
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      const double dxhat = static_cast<double>(loadAs<F>(dy, base + j)) * loadAs<F>(gamma, j);
      storeAs<F>(dx, base + j,
                 static_cast<float>(rstd * (dxhat - meanD - (loadAs<F>(x, base + j) - mean) * rstd * meanDX)));
    }
    if (threadIdx.x == 0) {
      moments[2 * r] = mean;
      moments[2 * r + 1] = rstd;
    }
  }
}

// Thread (c, j), c-major: chunk c of the rows' dy · xhat and dy for column j,
// rows in order (double); `partial` holds 2 · chunks · width doubles.
template <FloatFormat F>
__global__ void layerNormGradColumns(const void* x, const void* dy, double* partial, std::int64_t rows,
                                     std::int64_t width, std::int64_t chunks, const double* moments) {
  const std::int64_t length = (rows + chunks - 1) / chunks;
  for (std::int64_t t = firstIndex(); t < width * chunks; t += gridStride()) {
    const std::int64_t c = t / width, j = t % width;
    const std::int64_t first = c * length, last = first + length < rows ? first + length : rows;
    double dg = 0, db = 0;
    for (std::int64_t r = first; r < last; ++r) {
      const float d = loadAs<F>(dy, r * width + j);
      dg += d * ((loadAs<F>(x, r * width + j) - moments[2 * r]) * moments[2 * r + 1]);
      db += d;
    }
    partial[2 * t] = dg;
    partial[2 * t + 1] = db;
  }
}

struct ShiftedSum {
  float max;
  double sum;
};

// The row's maximum and Σ exp(x − max) in double, for every thread of the block.
template <FloatFormat F>
__device__ ShiftedSum shiftedSum(const void* logits, std::int64_t base, std::int64_t vocab) {
  float max = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) max = fmaxf(max, loadAs<F>(logits, base + j));
  max = blockMax(max);
  double sum = 0;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(loadAs<F>(logits, base + j) - max);
  return {max, blockSum(sum)};
}

template <FloatFormat F>
__global__ void crossEntropyRows(const void* logits, const std::int32_t* labels, std::int64_t rows,
                                 std::int64_t vocab, double* rowLoss) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const ShiftedSum s = shiftedSum<F>(logits, r * vocab, vocab);
    if (threadIdx.x == 0) rowLoss[r] = s.max + log(s.sum) - loadAs<F>(logits, r * vocab + labels[r]);
  }
}

// One block: the rows' losses summed in a fixed order (blockSumStrided; the
// cpu kernel adds them in row order, in double too).
__global__ void meanOfRows(const double* rowLoss, std::int64_t rows, float* loss) {
  const double total = blockSumStrided(rowLoss, rows, 1);
  if (threadIdx.x == 0) *loss = static_cast<float>(total / static_cast<double>(rows));
}

template <FloatFormat F>
__global__ void crossEntropyGradKernel(const void* logits, const std::int32_t* labels, const float* dloss,
                                       void* dlogits, std::int64_t rows, std::int64_t vocab) {
  const double factor = static_cast<double>(*dloss) / static_cast<double>(rows);
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const std::int64_t base = r * vocab;
    const ShiftedSum s = shiftedSum<F>(logits, base, vocab);
    const auto scale = static_cast<float>(factor / s.sum);
    const std::int32_t label = labels[r];
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float e = expf(loadAs<F>(logits, base + j) - s.max);
      storeAs<F>(dlogits, base + j, j == label ? static_cast<float>((e / s.sum - 1.0) * factor) : e * scale);
    }
  }
}

}  // namespace

void softmaxGrad(FloatFormat format, const void* y, const void* dy, void* dx, std::int64_t rows, std::int64_t width,
                 Stream stream) {
  detail::checkRows("softmaxGrad", rows, width, false);
  detail::checkPointers("softmaxGrad", rows * width, {y, dy, dx});
  if (rows * width == 0) return;
  withFormat(format, [&](auto f) {
    softmaxGradKernel<f()><<<rowBlocks(rows), kThreads, 0, stream>>>(y, dy, dx, rows, width);
  });
  checkLaunch();
}

void softmaxGrad(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t width, Stream stream) {
  softmaxGrad(FloatFormat::kF32, y, dy, dx, rows, width, stream);
}

std::int64_t layerNormGradScratch(std::int64_t rows, std::int64_t width) {
  return 2 * rows + 2 * chunksFor(width, rows) * width;
}

void layerNormGrad(FloatFormat format, const void* x, const void* gamma, const void* dy, void* dx,
                   FloatFormat dgammaFormat, void* dgamma, FloatFormat dbetaFormat, void* dbeta, std::int64_t rows,
                   std::int64_t width, double eps, double* scratch, Stream stream) {
  detail::checkRows("layerNormGrad", rows, width, false);
  detail::checkPointers("layerNormGrad", width, {gamma, dgamma, dbeta, scratch});
  detail::checkPointers("layerNormGrad", rows * width, {x, dy, dx});
  if (width == 0) return;
  double* moments = scratch;  // mean and rstd per row, then the column chunks' partial sums
  const std::int64_t chunks = chunksFor(width, rows);
  double* partial = scratch + 2 * rows;
  withFormat(format, [&](auto f) {
    if (rows > 0) {
      layerNormGradRows<f()><<<rowBlocks(rows), kThreads, 0, stream>>>(x, gamma, dy, dx, rows, width, eps, moments);
      checkLaunch();
    }
    layerNormGradColumns<f()><<<blocksFor(width * chunks), kThreads, 0, stream>>>(x, dy, partial, rows, width,
                                                                                  chunks, moments);
  });
  checkLaunch();
  // dgamma[j] = Σ_r dy · xhat and dbeta[j] = Σ_r dy: column j's chunk c at
  // partial[2 (c · width + j)] and the next double.
  const auto addColumns = [&](const double* first, FloatFormat format, void* y) {
    ChunkSums sums;
    sums.partial = first;
    sums.outputStride = 2;
    sums.chunkStride = 2 * width;
    sums.outputs = width;
    sums.chunks = chunks;
    sums.format = format;
    sums.y = y;
    addChunks(sums, stream);
  };
  addColumns(partial, dgammaFormat, dgamma);
  addColumns(partial + 1, dbetaFormat, dbeta);
}

void crossEntropy(FloatFormat format, const void* logits, const std::int32_t* labels, float* loss, std::int64_t rows,
                  std::int64_t vocab, double* rowLoss, Stream stream) {
  if (rows < 1 || vocab < 1)
    throw std::invalid_argument("cuda::crossEntropy: needs at least one row and one class");
  detail::checkPointers("crossEntropy", rows, {logits, labels, loss, rowLoss});
  withFormat(format, [&](auto f) {
    crossEntropyRows<f()><<<rowBlocks(rows), kThreads, 0, stream>>>(logits, labels, rows, vocab, rowLoss);
  });
  checkLaunch();
  meanOfRows<<<1, kThreads, 0, stream>>>(rowLoss, rows, loss);
  checkLaunch();
}

void crossEntropy(const float* logits, const std::int32_t* labels, float* loss, std::int64_t rows,
                  std::int64_t vocab, double* rowLoss, Stream stream) {
  crossEntropy(FloatFormat::kF32, logits, labels, loss, rows, vocab, rowLoss, stream);
}

void crossEntropyGrad(FloatFormat format, const void* logits, const std::int32_t* labels, const float* dloss,
                      void* dlogits, std::int64_t rows, std::int64_t vocab, Stream stream) {
  if (rows < 1 || vocab < 1)
    throw std::invalid_argument("cuda::crossEntropyGrad: needs at least one row and one class");
  detail::checkPointers("crossEntropyGrad", rows, {logits, labels, dloss, dlogits});
  withFormat(format, [&](auto f) {
    crossEntropyGradKernel<f()><<<rowBlocks(rows), kThreads, 0, stream>>>(logits, labels, dloss, dlogits, rows, vocab);
  });
  checkLaunch();
}

void crossEntropyGrad(const float* logits, const std::int32_t* labels, const float* dloss, float* dlogits,
                      std::int64_t rows, std::int64_t vocab, Stream stream) {
  crossEntropyGrad(FloatFormat::kF32, logits, labels, dloss, dlogits, rows, vocab, stream);
}

}  // namespace meshflow::runtime::cuda
