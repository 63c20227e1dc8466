// The fused attention kernels of AttentionKernels.h. Every kernel is a block
// of kWarps warps over one tile: kRows query rows (the forward, the row term
// and dq) or kKeys keys (dk and dv), streaming the other side through shared
// memory one tile at a time. Within a block, a warp owns rows (or keys) and a
// lane owns features t = lane + 32u, so each accumulator lives in one
// thread's registers and is added to in a fixed order: no atomics, the same
// bits every run.
//
// The backward runs three kernels in stream order: the row term
// D_i = Σ_j p_ij · (dOut_i · v_j) per query row, then dq per query tile and
// dk, dv per key tile, each recomputing p_ij = exp(q_i · k_j · scale − lse_i)
// and ds_ij = p_ij · (dOut_i · v_j − D_i) · scale for its tile pairs.
#include <climits>
#include <stdexcept>
#include <string>

#include "runtime/cuda/AttentionKernels.h"
#include "runtime/cuda/KernelSupport.cuh"

namespace meshflow::runtime::cuda {
namespace {

constexpr int kRows = 16;  // query rows of a tile
constexpr int kKeys = 16;  // keys of a tile
constexpr int kWarps = 4;
constexpr int kBlock = kWarps * 32;
constexpr int kRowsPerWarp = kRows / kWarps;
constexpr int kKeysPerWarp = kKeys / kWarps;
constexpr int kPerLane = static_cast<int>(kMaxAttentionHeadDim / 32);  // features a lane owns
static_assert(kKeys <= 32, "a warp's lanes hold a row's scores of one key tile");
static_assert(kRows % kWarps == 0 && kKeys % kWarps == 0 && kMaxAttentionHeadDim % 32 == 0);

// The block's shared memory: row tiles of q and dOut and key tiles of k and v
// (rows of d features, padded to ld = d + 1 so that a warp reading a column
// hits distinct banks), a kRows × kKeys tile of scores (then probabilities)
// and one of dOut · v (then p · dp or ds), and the query rows' lse and D.
struct Tiles {
  float *q, *dOut, *k, *v, *scores, *grads, *lse, *rowTerm;
  int ld;
};

std::size_t tileBytes(std::int64_t d) {
  return sizeof(float) * static_cast<std::size_t>((2 * kRows + 2 * kKeys) * (d + 1) + 2 * kRows * kKeys + 2 * kRows);
}

__device__ Tiles tilesIn(float* shared, int d) {
  Tiles t;
  t.ld = d + 1;
  t.q = shared;
  t.dOut = t.q + kRows * t.ld;
  t.k = t.dOut + kRows * t.ld;
  t.v = t.k + kKeys * t.ld;
  t.scores = t.v + kKeys * t.ld;
  t.grads = t.scores + kRows * kKeys;
  t.lse = t.grads + kRows * kKeys;
  t.rowTerm = t.lse + kRows;
  return t;
}

// The keys query row i sees (a prefix 0..seen−1).
__device__ inline std::int64_t seenBy(const AttentionSizes& a, std::int64_t i) {
  return a.causal ? i % a.s + 1 : a.s;
}

// The most keys a row of the query tile from `first` sees (0: no row of it is
// below r). A key tile from j0 matters to the query tile iff this exceeds j0.
__device__ inline std::int64_t keysOfTile(const AttentionSizes& a, std::int64_t first) {
  std::int64_t most = 0;
  for (std::int64_t i = first; i < first + kRows && i < a.r; ++i) {
    const std::int64_t seen = seenBy(a, i);
    most = seen > most ? seen : most;
  }
  return most;
}

// Rows first..first+count−1 of a matrix of d-wide rows (batch rows from
// `base`) into `dst` as f32, rows at or past `limit` as zeros.
template <FloatFormat F>
__device__ void loadTile(const void* src, std::int64_t base, std::int64_t first, std::int64_t limit, int count,
                         int d, int ld, float* dst) {
  for (int e = threadIdx.x; e < count * d; e += blockDim.x) {
    const int row = e / d, t = e % d;
    dst[row * ld + t] = first + row < limit ? loadAs<F>(src, (base + first + row) * d + t) : 0.0f;
  }
}

// dst[a · kKeys + c] = Σ_t x[a][t] · y[c][t], t ascending (the cpu kernel's dot).
__device__ void tileDots(const float* x, const float* y, int d, int ld, float* dst) {
  for (int e = threadIdx.x; e < kRows * kKeys; e += blockDim.x) {
    const int a = e / kKeys, c = e % kKeys;
    float sum = 0;
    for (int t = 0; t < d; ++t) sum += x[a * ld + t] * y[c * ld + t];
    dst[e] = sum;
  }
}

// The query rows first..first+kRows−1 of batch b: q, dOut, lse and (when
// given) D into the tiles; rows past r as zeros.
template <FloatFormat F>
__device__ void loadQueryTile(const AttentionSizes& a, const Tiles& t, const void* q, const void* dOut,
                              const float* lse, const float* rowTerm, std::int64_t b, std::int64_t first) {
  const int d = static_cast<int>(a.d);
  loadTile<F>(q, b * a.r, first, a.r, kRows, d, t.ld, t.q);
  loadTile<F>(dOut, b * a.r, first, a.r, kRows, d, t.ld, t.dOut);
  for (int e = threadIdx.x; e < kRows; e += blockDim.x) {
    const std::int64_t i = first + e;
    t.lse[e] = i < a.r ? lse[b * a.r + i] : 0.0f;
    t.rowTerm[e] = rowTerm && i < a.r ? rowTerm[b * a.r + i] : 0.0f;
  }
}

template <FloatFormat F>
__device__ void loadKeyTile(const AttentionSizes& a, const Tiles& t, const void* k, const void* v, std::int64_t b,
                            std::int64_t j0) {
  const int d = static_cast<int>(a.d);
  loadTile<F>(k, b * a.s, j0, a.s, kKeys, d, t.ld, t.k);
  loadTile<F>(v, b * a.s, j0, a.s, kKeys, d, t.ld, t.v);
}

// Given scores = q · k and grads = dOut · v for the tile pair (query rows
// from `first`, keys from j0): scores ← p (0 where the row does not see the
// key or is past r), grads ← p · dp (`rowTermOnly`) or ds = p · (dp − D) · scale,
// in the cpu reference's order of operations.
__device__ void probabilities(const AttentionSizes& a, const Tiles& t, std::int64_t first, std::int64_t j0,
                              bool rowTermOnly) {
  for (int e = threadIdx.x; e < kRows * kKeys; e += blockDim.x) {
    const int row = e / kKeys, c = e % kKeys;
    const std::int64_t i = first + row;
    const bool seen = i < a.r && j0 + c < seenBy(a, i);
    const float p = seen ? expf(t.scores[e] * a.scale - t.lse[row]) : 0.0f;
    const float dp = t.grads[e];
    t.scores[e] = p;
    t.grads[e] = rowTermOnly ? p * dp : p * (dp - t.rowTerm[row]) * a.scale;
  }
}

__device__ inline float laneSum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// A block per (batch, query tile): the online softmax over key tiles (a
// running max m and sum l per row, the output rescaled when m grows).
template <FloatFormat F>
__global__ void __launch_bounds__(kBlock)
    forwardKernel(const void* q, const void* k, const void* v, void* out, float* lse, AttentionSizes a) {
  extern __shared__ float shared[];
  const Tiles t = tilesIn(shared, static_cast<int>(a.d));
  const int d = static_cast<int>(a.d), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t tiles = (a.r + kRows - 1) / kRows;
  const std::int64_t b = blockIdx.x / tiles, first = blockIdx.x % tiles * kRows;
  loadTile<F>(q, b * a.r, first, a.r, kRows, d, t.ld, t.q);
  float acc[kRowsPerWarp][kPerLane] = {}, m[kRowsPerWarp], l[kRowsPerWarp];
  for (int w = 0; w < kRowsPerWarp; ++w) m[w] = -INFINITY, l[w] = 0;
  const std::int64_t keys = keysOfTile(a, first);
  for (std::int64_t j0 = 0; j0 < keys; j0 += kKeys) {
    __syncthreads();  // q loaded; the last tile's readers done
    loadKeyTile<F>(a, t, k, v, b, j0);
    __syncthreads();
    tileDots(t.q, t.k, d, t.ld, t.scores);
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kRowsPerWarp; ++w) {
      const int row = warp * kRowsPerWarp + w;
      const std::int64_t i = first + row;
      if (i >= a.r) continue;  // the same for the whole warp
      // Every row sees key 0, so the first tile's maximum is finite, and so is `top` after it.
      const bool seen = lane < kKeys && j0 + lane < seenBy(a, i);
      const float x = seen ? t.scores[row * kKeys + lane] * a.scale : -INFINITY;
      const float top = fmaxf(m[w], warpMax(x));
      const float p = seen ? expf(x - top) : 0.0f;
      if (lane < kKeys) t.scores[row * kKeys + lane] = p;
      __syncwarp();
      const float correction = expf(m[w] - top);  // 0 on the first tile (m = −∞)
      l[w] = l[w] * correction + laneSum(p);
      m[w] = top;
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        const int f = lane + 32 * u;
        if (f < d) {
          float sum = 0;
          for (int c = 0; c < kKeys; ++c) sum += t.scores[row * kKeys + c] * t.v[c * t.ld + f];
          acc[w][u] = acc[w][u] * correction + sum;
        }
      }
    }
  }
#pragma unroll
  for (int w = 0; w < kRowsPerWarp; ++w) {
    const std::int64_t i = first + warp * kRowsPerWarp + w;
    if (i >= a.r) continue;
    const std::int64_t row = b * a.r + i;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int f = lane + 32 * u;
      if (f < d) storeAs<F>(out, row * d + f, acc[w][u] / l[w]);
    }
    if (lane == 0) lse[row] = m[w] + logf(l[w]);
  }
}

// A block per (batch, query tile), over the key tiles its rows see: the row
// term D (kQueryGrad false: Σ over keys of p · dp, each lane summing its key
// column in tile order, then a fixed tree over the lanes) or dq (Σ_j ds_ij k_j).
template <FloatFormat F, bool kQueryGrad>
__global__ void __launch_bounds__(kBlock)
    queryPassKernel(const void* q, const void* k, const void* v, const void* dOut, const float* lse, float* rowTerm,
                    void* dq, AttentionSizes a) {
  extern __shared__ float shared[];
  const Tiles t = tilesIn(shared, static_cast<int>(a.d));
  const int d = static_cast<int>(a.d), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t tiles = (a.r + kRows - 1) / kRows;
  const std::int64_t b = blockIdx.x / tiles, first = blockIdx.x % tiles * kRows;
  loadQueryTile<F>(a, t, q, dOut, lse, kQueryGrad ? rowTerm : nullptr, b, first);
  float acc[kRowsPerWarp][kPerLane] = {};  // dq, or in [w][0] a lane's part of D
  const std::int64_t keys = keysOfTile(a, first);
  for (std::int64_t j0 = 0; j0 < keys; j0 += kKeys) {
    __syncthreads();
    loadKeyTile<F>(a, t, k, v, b, j0);
    __syncthreads();
    tileDots(t.q, t.k, d, t.ld, t.scores);
    tileDots(t.dOut, t.v, d, t.ld, t.grads);
    __syncthreads();
    probabilities(a, t, first, j0, !kQueryGrad);
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kRowsPerWarp; ++w) {
      const int row = warp * kRowsPerWarp + w;
      if constexpr (kQueryGrad) {
#pragma unroll
        for (int u = 0; u < kPerLane; ++u) {
          const int f = lane + 32 * u;
          if (f < d) {
            float sum = 0;
            for (int c = 0; c < kKeys; ++c) sum += t.grads[row * kKeys + c] * t.k[c * t.ld + f];
            acc[w][u] += sum;
          }
        }
      } else if (lane < kKeys) {
        acc[w][0] += t.grads[row * kKeys + lane];
      }
    }
  }
#pragma unroll
  for (int w = 0; w < kRowsPerWarp; ++w) {
    const std::int64_t i = first + warp * kRowsPerWarp + w;
    if (i >= a.r) continue;  // the same for the whole warp
    const std::int64_t row = b * a.r + i;
    if constexpr (kQueryGrad) {
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        const int f = lane + 32 * u;
        if (f < d) storeAs<F>(dq, row * d + f, acc[w][u]);
      }
    } else {
      const float total = laneSum(acc[w][0]);
      if (lane == 0) rowTerm[row] = total;
    }
  }
}

// A block per (batch, key tile), over the query tiles that see its keys in
// row order: dv_j = Σ_i p_ij dOut_i and dk_j = Σ_i ds_ij q_i.
template <FloatFormat F>
__global__ void __launch_bounds__(kBlock)
    keyPassKernel(const void* q, const void* k, const void* v, const void* dOut, const float* lse,
                  const float* rowTerm, void* dk, void* dv, AttentionSizes a) {
  extern __shared__ float shared[];
  const Tiles t = tilesIn(shared, static_cast<int>(a.d));
  const int d = static_cast<int>(a.d), warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::int64_t tiles = (a.s + kKeys - 1) / kKeys;
  const std::int64_t b = blockIdx.x / tiles, j0 = blockIdx.x % tiles * kKeys;
  loadKeyTile<F>(a, t, k, v, b, j0);
  float dkAcc[kKeysPerWarp][kPerLane] = {}, dvAcc[kKeysPerWarp][kPerLane] = {};
  for (std::int64_t first = 0; first < a.r; first += kRows) {
    if (keysOfTile(a, first) <= j0) continue;  // no row of it sees these keys (the same for every thread)
    __syncthreads();  // the key tile loaded; the last query tile's readers done
    loadQueryTile<F>(a, t, q, dOut, lse, rowTerm, b, first);
    __syncthreads();
    tileDots(t.q, t.k, d, t.ld, t.scores);
    tileDots(t.dOut, t.v, d, t.ld, t.grads);
    __syncthreads();
    probabilities(a, t, first, j0, false);
    __syncthreads();
#pragma unroll
    for (int w = 0; w < kKeysPerWarp; ++w) {
      const int c = warp * kKeysPerWarp + w;
#pragma unroll
      for (int u = 0; u < kPerLane; ++u) {
        const int f = lane + 32 * u;
        if (f < d) {
          float sumV = 0, sumK = 0;
          for (int row = 0; row < kRows; ++row) {
            sumV += t.scores[row * kKeys + c] * t.dOut[row * t.ld + f];
            sumK += t.grads[row * kKeys + c] * t.q[row * t.ld + f];
          }
          dvAcc[w][u] += sumV;
          dkAcc[w][u] += sumK;
        }
      }
    }
  }
#pragma unroll
  for (int w = 0; w < kKeysPerWarp; ++w) {
    const std::int64_t j = j0 + warp * kKeysPerWarp + w;
    if (j >= a.s) continue;
    const std::int64_t key = b * a.s + j;
#pragma unroll
    for (int u = 0; u < kPerLane; ++u) {
      const int f = lane + 32 * u;
      if (f < d) {
        storeAs<F>(dk, key * d + f, dkAcc[w][u]);
        storeAs<F>(dv, key * d + f, dvAcc[w][u]);
      }
    }
  }
}

void checkSizes(const char* kernel, const AttentionSizes& a) {
  const std::string name = std::string("cuda::") + kernel + ": ";
  if (a.n < 0 || a.r < 0 || a.s < 0) throw std::invalid_argument(name + "negative sizes");
  if (a.d < 1 || a.d > kMaxAttentionHeadDim)
    throw std::invalid_argument(name + "head dimension " + std::to_string(a.d) + " outside 1.." +
                                std::to_string(kMaxAttentionHeadDim));
  if (a.r > 0 && a.s == 0) throw std::invalid_argument(name + "no keys to attend to");
  if (a.causal && a.s > 0 && a.r % a.s != 0)
    throw std::invalid_argument(name + "causal attention needs the query rows (" + std::to_string(a.r) +
                                ") a multiple of the keys (" + std::to_string(a.s) + ")");
}

// Blocks for `batches` × ceil(count / tile) tiles (0: nothing to launch).
int tileBlocks(const char* kernel, std::int64_t batches, std::int64_t count, int tile) {
  const std::int64_t blocks = batches * ((count + tile - 1) / tile);
  if (blocks > INT_MAX) throw std::invalid_argument(std::string("cuda::") + kernel + ": too many tiles");
  return static_cast<int>(blocks);
}

}  // namespace

void attentionForward(FloatFormat format, const void* q, const void* k, const void* v, void* out, float* lse,
                      const AttentionSizes& sizes, Stream stream) {
  checkSizes("attentionForward", sizes);
  detail::checkPointers("attentionForward", sizes.n * sizes.r, {q, k, v, out, lse});
  const int blocks = tileBlocks("attentionForward", sizes.n, sizes.r, kRows);
  if (blocks == 0) return;
  withFormat(format, [&](auto f) {
    forwardKernel<f()><<<blocks, kBlock, tileBytes(sizes.d), stream>>>(q, k, v, out, lse, sizes);
  });
  checkLaunch();
}

void attentionBackward(FloatFormat format, const void* q, const void* k, const void* v, const void* dOut,
                       const float* lse, float* rowTerm, void* dq, void* dk, void* dv, const AttentionSizes& sizes,
                       Stream stream) {
  checkSizes("attentionBackward", sizes);
  detail::checkPointers("attentionBackward", sizes.n * sizes.r, {q, dOut, lse, rowTerm, dq});
  detail::checkPointers("attentionBackward", sizes.n * sizes.s, {k, v, dk, dv});
  const int queryBlocks = tileBlocks("attentionBackward", sizes.n, sizes.r, kRows);
  const int keyBlocks = tileBlocks("attentionBackward", sizes.n, sizes.s, kKeys);
  const std::size_t bytes = tileBytes(sizes.d);
  withFormat(format, [&](auto f) {
    if (queryBlocks > 0) {
      queryPassKernel<f(), false>
          <<<queryBlocks, kBlock, bytes, stream>>>(q, k, v, dOut, lse, rowTerm, nullptr, sizes);
      checkLaunch();
      queryPassKernel<f(), true><<<queryBlocks, kBlock, bytes, stream>>>(q, k, v, dOut, lse, rowTerm, dq, sizes);
      checkLaunch();
    }
    // With no query rows (r = 0) dk and dv are zeros: each block sums no tile.
    if (keyBlocks > 0) {
      keyPassKernel<f()><<<keyBlocks, kBlock, bytes, stream>>>(q, k, v, dOut, lse, rowTerm, dk, dv, sizes);
      checkLaunch();
    }
  });
}

}  // namespace meshflow::runtime::cuda
