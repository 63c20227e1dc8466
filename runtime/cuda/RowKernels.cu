// Row kernels of TrainingKernels.h: softmax's and layer norm's backward and
// cross-entropy with its gradient. A block per row; its threads stride the
// row and combine through KernelSupport.cuh's block reductions.
#include <stdexcept>

#include "runtime/cuda/KernelSupport.cuh"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {
namespace {

__global__ void softmaxGradKernel(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t width) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* ys = y + r * width;
    const float* ds = dy + r * width;
    double dot = 0;
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) dot += static_cast<double>(ys[j]) * ds[j];
    dot = blockSum(dot);
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x)
      dx[r * width + j] = static_cast<float>(ys[j] * (ds[j] - dot));
  }
}

// dx per row, as the cpu kernel: rstd · (dxhat − mean(dxhat) − xhat · mean(dxhat · xhat)).
__global__ void layerNormGradRows(const float* x, const float* gamma, const float* dy, float* dx, std::int64_t rows,
                                  std::int64_t width, double eps, double* moments) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* in = x + r * width;
    const float* d = dy + r * width;
    const auto [mean, rstd] = rowMoments(in, width, eps);
    double meanD = 0, meanDX = 0;
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      const double dxhat = static_cast<double>(d[j]) * gamma[j];
      meanD += dxhat;
      meanDX += dxhat * ((in[j] - mean) * rstd);
    }
    meanD = blockSum(meanD) / static_cast<double>(width);
    meanDX = blockSum(meanDX) / static_cast<double>(width);
    for (std::int64_t j = threadIdx.x; j < width; j += blockDim.x) {
      const double dxhat = static_cast<double>(d[j]) * gamma[j];
      dx[r * width + j] = static_cast<float>(rstd * (dxhat - meanD - (in[j] - mean) * rstd * meanDX));
    }
    if (threadIdx.x == 0) {
      moments[2 * r] = mean;
      moments[2 * r + 1] = rstd;
    }
  }
}

// dgamma[j] = Σ_r dy · xhat, dbeta[j] = Σ_r dy: a thread per column, rows in order.
__global__ void layerNormGradColumns(const float* x, const float* dy, float* dgamma, float* dbeta, std::int64_t rows,
                                     std::int64_t width, const double* moments) {
  for (std::int64_t j = firstIndex(); j < width; j += gridStride()) {
    double dg = 0, db = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const float d = dy[r * width + j];
      dg += d * ((x[r * width + j] - moments[2 * r]) * moments[2 * r + 1]);
      db += d;
    }
    dgamma[j] = static_cast<float>(dg);
    dbeta[j] = static_cast<float>(db);
  }
}

struct ShiftedSum {
  float max;
  double sum;
};

// The row's maximum and Σ exp(x − max) in double, for every thread of the block.
__device__ ShiftedSum shiftedSum(const float* row, std::int64_t vocab) {
  float max = -INFINITY;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) max = fmaxf(max, row[j]);
  max = blockMax(max);
  double sum = 0;
  for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) sum += expf(row[j] - max);
  return {max, blockSum(sum)};
}

__global__ void crossEntropyRows(const float* logits, const std::int32_t* labels, std::int64_t rows,
                                 std::int64_t vocab, double* rowLoss) {
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * vocab;
    const ShiftedSum s = shiftedSum(row, vocab);
    if (threadIdx.x == 0) rowLoss[r] = s.max + log(s.sum) - row[labels[r]];
  }
}

// One thread: the rows' losses summed in row order, as the cpu kernel.
__global__ void meanOfRows(const double* rowLoss, std::int64_t rows, float* loss) {
  double total = 0;
  for (std::int64_t r = 0; r < rows; ++r) total += rowLoss[r];
  *loss = static_cast<float>(total / static_cast<double>(rows));
}

__global__ void crossEntropyGradKernel(const float* logits, const std::int32_t* labels, const float* dloss,
                                       float* dlogits, std::int64_t rows, std::int64_t vocab) {
  const double factor = static_cast<double>(*dloss) / static_cast<double>(rows);
  for (std::int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* row = logits + r * vocab;
    float* out = dlogits + r * vocab;
    const ShiftedSum s = shiftedSum(row, vocab);
    const auto scale = static_cast<float>(factor / s.sum);
    const std::int32_t label = labels[r];
    for (std::int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
      const float e = expf(row[j] - s.max);
      out[j] = j == label ? static_cast<float>((e / s.sum - 1.0) * factor) : e * scale;
    }
  }
}

}  // namespace

void softmaxGrad(const float* y, const float* dy, float* dx, std::int64_t rows, std::int64_t width, Stream stream) {
  detail::checkRows("softmaxGrad", rows, width, false);
  detail::checkPointers("softmaxGrad", rows * width, {y, dy, dx});
  if (rows * width == 0) return;
  softmaxGradKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(y, dy, dx, rows, width);
  checkLaunch();
}

void layerNormGrad(const float* x, const float* gamma, const float* dy, float* dx, float* dgamma, float* dbeta,
                   std::int64_t rows, std::int64_t width, double eps, double* moments, Stream stream) {
  detail::checkRows("layerNormGrad", rows, width, false);
  detail::checkPointers("layerNormGrad", width, {gamma, dgamma, dbeta});
  detail::checkPointers("layerNormGrad", rows * width, {x, dy, dx, moments});
  if (width == 0) return;
  if (rows > 0) {
    layerNormGradRows<<<rowBlocks(rows), kThreads, 0, stream>>>(x, gamma, dy, dx, rows, width, eps, moments);
    checkLaunch();
  }
  layerNormGradColumns<<<blocksFor(width), kThreads, 0, stream>>>(x, dy, dgamma, dbeta, rows, width, moments);
  checkLaunch();
}

void crossEntropy(const float* logits, const std::int32_t* labels, float* loss, std::int64_t rows,
                  std::int64_t vocab, double* rowLoss, Stream stream) {
  if (rows < 1 || vocab < 1)
    throw std::invalid_argument("cuda::crossEntropy: needs at least one row and one class");
  detail::checkPointers("crossEntropy", rows, {logits, labels, loss, rowLoss});
  crossEntropyRows<<<rowBlocks(rows), kThreads, 0, stream>>>(logits, labels, rows, vocab, rowLoss);
  checkLaunch();
  meanOfRows<<<1, 1, 0, stream>>>(rowLoss, rows, loss);
  checkLaunch();
}

void crossEntropyGrad(const float* logits, const std::int32_t* labels, const float* dloss, float* dlogits,
                      std::int64_t rows, std::int64_t vocab, Stream stream) {
  if (rows < 1 || vocab < 1)
    throw std::invalid_argument("cuda::crossEntropyGrad: needs at least one row and one class");
  detail::checkPointers("crossEntropyGrad", rows, {logits, labels, dloss, dlogits});
  crossEntropyGradKernel<<<rowBlocks(rows), kThreads, 0, stream>>>(logits, labels, dloss, dlogits, rows, vocab);
  checkLaunch();
}

}  // namespace meshflow::runtime::cuda
