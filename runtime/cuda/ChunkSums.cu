#include "runtime/cuda/ChunkSums.h"

#include "runtime/cuda/KernelSupport.cuh"

namespace meshflow::runtime::cuda {
namespace {

__device__ void store(const ChunkSums& s, std::int64_t o, double sum) {
  storeIn(s.format, s.y, o, static_cast<float>(sum * s.factor));
}

// Few chunks an output: a thread per output, chunks in order.
__global__ void addChunksByThread(ChunkSums s) {
  for (std::int64_t o = firstIndex(); o < s.outputs; o += gridStride()) {
    double sum = 0;
    for (std::int64_t c = 0; c < s.chunks; ++c) sum += s.partial[o * s.outputStride + c * s.chunkStride];
    store(s, o, sum);
  }
}

// Many chunks an output (a long sum into few outputs): a block per output.
__global__ void addChunksByBlock(ChunkSums s) {
  for (std::int64_t o = blockIdx.x; o < s.outputs; o += gridDim.x) {
    const double sum = blockSumStrided(s.partial + o * s.outputStride, s.chunks, s.chunkStride);
    if (threadIdx.x == 0) store(s, o, sum);
  }
}

}  // namespace

void addChunks(const ChunkSums& sums, Stream stream) {
  if (sums.outputs == 0) return;
  if (sums.chunks >= kBlockAddsFrom)
    addChunksByBlock<<<rowBlocks(sums.outputs), kThreads, 0, stream>>>(sums);
  else
    addChunksByThread<<<blocksFor(sums.outputs), kThreads, 0, stream>>>(sums);
  checkLaunch();
}

}  // namespace meshflow::runtime::cuda
