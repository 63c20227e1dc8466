// The second pass of a long sum cut into chunks (TrainingKernels.h's sumOver,
// layer norm's dgamma and dbeta): each output's chunk sums added in a fixed
// order and the result stored in the output's format. Private to
// runtime/cuda's kernel files.
#pragma once

#include <cstdint>

#include "runtime/cuda/Kernels.h"

namespace meshflow::runtime::cuda {

/// y[o] = factor · Σ_c partial[o · outputStride + c · chunkStride] over
/// c < chunks, for o < outputs, rounded to f32 and then to `format`.
struct ChunkSums {
  const double* partial = nullptr;
  std::int64_t outputStride = 1, chunkStride = 1, outputs = 0, chunks = 1;
  double factor = 1.0;
  FloatFormat format = FloatFormat::kF32;
  void* y = nullptr;
};

/// Chunk counts from which a block adds each output's chunks (every 256th
/// per thread in order, then a fixed tree); below, one thread per output adds
/// them in order. Chosen by the sizes alone, so a run's bits never depend on
/// the GPU.
constexpr std::int64_t kBlockAddsFrom = 64;

/// Enqueues the additions on `stream` (the partial sums written before on it).
void addChunks(const ChunkSums& sums, Stream stream);

}  // namespace meshflow::runtime::cuda
