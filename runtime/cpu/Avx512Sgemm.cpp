// meshflow's own sgemm for CPUs with AVX-512 (Sgemm.h says why and what order
// it sums in). The classic blocking of a packed GEMM: a block of op(b)'s
// columns and kDepth of its rows is copied into panels of kCols columns
// (kept in L3, each panel in L1 while it is used), a block of op(a)'s rows
// into panels of kRows rows (kept in L2), and a micro-kernel multiplies one
// panel of each into a kRows x kCols tile of y held in 24 vector registers.
// Packing folds the transposes in, so a transposed operand is never copied
// whole, and pads the last panels with zeros, so every tile runs the same
// kernel and only its store is masked.

// GCC 12's AVX-512 shuffles start from _mm512_undefined_ps(), which its
// -Wuninitialized reports once they are inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>

#include "runtime/cpu/Sgemm.h"

namespace meshflow::runtime::cpu {
namespace {

constexpr std::int64_t kRows = 12;  // rows of a tile of y
constexpr std::int64_t kCols = 32;  // columns of a tile: two 16-float vectors
constexpr std::int64_t kDepth = kSgemmDepthBlock;
constexpr std::int64_t kRowBlock = 16 * kRows;  // rows of op(a) packed at once: 192 KiB
constexpr std::int64_t kColBlock = 2048;        // columns of op(b) packed at once: 2 MiB

// Where element (lane, depth) of an operand lies: a lane is a row of op(a) or
// a column of op(b); the depth runs along k.
struct Strides {
  std::int64_t lane, depth;
};

// A device thread's packing buffers, 64-byte aligned, grown on demand and kept
// for the thread's next GEMM (each virtual device is one thread).
class PackBuffer {
 public:
  float* reserve(std::int64_t floats) {
    if (floats > capacity_) {
      std::size_t bytes = (static_cast<std::size_t>(floats) * sizeof(float) + 63) / 64 * 64;
      data_.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
      if (!data_) throw std::bad_alloc();
      capacity_ = floats;
    }
    return data_.get();
  }

 private:
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
  std::int64_t capacity_ = 0;
};

// The first `lanes` of a vector's 16 (all past 16, none below 1).
__mmask16 laneMask(std::int64_t lanes) {
  if (lanes >= 16) return 0xFFFF;
  return lanes <= 0 ? 0 : static_cast<__mmask16>((1u << lanes) - 1);
}

// Transposes a 16 x 16 block held as 16 row vectors, in place: four rounds
// of shuffles, each interleaving twice as wide a unit (floats, pairs of
// floats, 128-bit and then 256-bit lanes).
__attribute__((target("avx512f"))) void transpose16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i)
    for (int h = 0; h < 2; ++h) {
      const __m512d x = _mm512_castps_pd(t[4 * i + h]), y = _mm512_castps_pd(t[4 * i + h + 2]);
      r[4 * i + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(x, y));
      r[4 * i + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x, y));
    }
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0x88);
      t[8 * i + 4 + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + 4 + j], 0xdd);
    }
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
  }
}

// Packs 16 depth steps from p of an operand whose lanes are strided (its
// depth contiguous): 16 lanes at a time, loaded as rows and transposed.
template <std::int64_t kWidth>
__attribute__((target("avx512f"))) void packStridedSteps(const float* src, std::int64_t laneStride,
                                                         std::int64_t lanes, std::int64_t p,
                                                         float* dst) {
  for (std::int64_t l0 = 0; l0 < kWidth; l0 += 16) {
    __m512 block[16];
    for (std::int64_t q = 0; q < 16; ++q)
      block[q] =
          l0 + q < lanes ? _mm512_loadu_ps(src + (l0 + q) * laneStride + p) : _mm512_setzero_ps();
    transpose16(block);
    const __mmask16 mask = laneMask(kWidth - l0);
    for (std::int64_t q = 0; q < 16; ++q)
      _mm512_mask_storeu_ps(dst + (p + q) * kWidth + l0, mask, block[q]);
  }
}

// Copies `lanes` lanes (of kWidth) and `depth` steps of `src` into `dst`,
// depth-major: dst[p * kWidth + l]. Lanes past `lanes` are zeros.
template <std::int64_t kWidth>
__attribute__((target("avx512f"))) void packPanel(const float* src, Strides s, std::int64_t lanes,
                                                  std::int64_t depth, float* dst) {
  if (s.lane == 1 && lanes == kWidth) {
    for (std::int64_t p = 0; p < depth; ++p)
      for (std::int64_t l = 0; l < kWidth; ++l) dst[p * kWidth + l] = src[p * s.depth + l];
    return;
  }
  if (s.lane == 1) {
    for (std::int64_t p = 0; p < depth; ++p)
      for (std::int64_t l = 0; l < kWidth; ++l)
        dst[p * kWidth + l] = l < lanes ? src[p * s.depth + l] : 0.0f;
    return;
  }
  // Strided lanes: the depth is contiguous (s.depth is 1), as ownSgemm's
  // strides give it for a row-major a and a transposed b.
  std::int64_t p = 0;
  for (; p + 16 <= depth; p += 16) packStridedSteps<kWidth>(src, s.lane, lanes, p, dst);
  for (; p < depth; ++p)
    for (std::int64_t l = 0; l < kWidth; ++l)
      dst[p * kWidth + l] = l < lanes ? src[l * s.lane + p] : 0.0f;
}

// Packs `lanes` lanes of an operand, from lane `first` and depth `p0`, into
// consecutive panels of kWidth lanes.
template <std::int64_t kWidth>
__attribute__((target("avx512f"))) void packBlock(const float* base, Strides s, std::int64_t first,
                                                  std::int64_t lanes, std::int64_t p0,
                                                  std::int64_t depth, float* dst) {
  for (std::int64_t l = 0; l < lanes; l += kWidth)
    packPanel<kWidth>(base + (first + l) * s.lane + p0 * s.depth, s, std::min(kWidth, lanes - l),
                      depth, dst + l * depth);
}

// The kRows x kCols tile of y at `y` (row stride ldy) of which `rows` x `cols`
// are real: the products of `depth` steps of the packed panels, summed in
// order, stored (or added to y, when `accumulate`: a later depth block).
__attribute__((target("avx512f"))) void microKernel(std::int64_t depth, const float* ap,
                                                    const float* bp, float* y, std::int64_t ldy,
                                                    std::int64_t rows, std::int64_t cols,
                                                    bool accumulate) {
  __m512 acc[kRows][2];
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < depth; ++p) {
    const __m512 b0 = _mm512_load_ps(bp + p * kCols);
    const __m512 b1 = _mm512_load_ps(bp + p * kCols + 16);
#pragma GCC unroll 12
    for (int i = 0; i < kRows; ++i) {
      const __m512 ai = _mm512_set1_ps(ap[p * kRows + i]);
      acc[i][0] = _mm512_fmadd_ps(ai, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(ai, b1, acc[i][1]);
    }
  }
  const __mmask16 mask0 = laneMask(cols), mask1 = laneMask(cols - 16);
#pragma GCC unroll 12
  for (int i = 0; i < kRows; ++i) {
    if (i >= rows) break;
    float* row = y + i * ldy;
    __m512 v0 = acc[i][0], v1 = acc[i][1];
    if (accumulate) {
      v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(mask0, row), v0);
      v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(mask1, row + 16), v1);
    }
    _mm512_mask_storeu_ps(row, mask0, v0);
    _mm512_mask_storeu_ps(row + 16, mask1, v1);
  }
}

// Every tile of y's rows [r0, r0 + rows) and columns [c0, c0 + cols) from the
// packed blocks of op(a) (those rows) and op(b) (those columns).
__attribute__((target("avx512f"))) void multiplyBlocks(const float* aPacked, const float* bPacked,
                                                       float* y, std::int64_t n, std::int64_t r0,
                                                       std::int64_t rows, std::int64_t c0,
                                                       std::int64_t cols, std::int64_t depth,
                                                       bool accumulate) {
  for (std::int64_t j = 0; j < cols; j += kCols)
    for (std::int64_t i = 0; i < rows; i += kRows)
      microKernel(depth, aPacked + i * depth, bPacked + j * depth, y + (r0 + i) * n + c0 + j, n,
                  std::min(kRows, rows - i), std::min(kCols, cols - j), accumulate);
}

std::int64_t roundUp(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

}  // namespace

bool ownSgemm(const float* a, const float* b, float* y, const GemmShape& shape) {
  if (!__builtin_cpu_supports("avx512f")) return false;
  const auto [m, n, k, transposeA, transposeB] = shape;
  if (m == 0 || n == 0) return true;
  if (k == 0) {
    std::fill(y, y + m * n, 0.0f);
    return true;
  }
  const Strides aStrides = transposeA ? Strides{1, m} : Strides{k, 1};
  const Strides bStrides = transposeB ? Strides{k, 1} : Strides{1, n};
  thread_local PackBuffer aBuffer, bBuffer;
  const std::int64_t depthBlock = std::min(kDepth, k);
  float* aPacked = aBuffer.reserve(roundUp(std::min(kRowBlock, m), kRows) * depthBlock);
  float* bPacked = bBuffer.reserve(roundUp(std::min(kColBlock, n), kCols) * depthBlock);
  for (std::int64_t c0 = 0; c0 < n; c0 += kColBlock) {
    const std::int64_t cols = std::min(kColBlock, n - c0);
    for (std::int64_t p0 = 0; p0 < k; p0 += kDepth) {
      const std::int64_t depth = std::min(kDepth, k - p0);
      packBlock<kCols>(b, bStrides, c0, cols, p0, depth, bPacked);
      for (std::int64_t r0 = 0; r0 < m; r0 += kRowBlock) {
        const std::int64_t rows = std::min(kRowBlock, m - r0);
        packBlock<kRows>(a, aStrides, r0, rows, p0, depth, aPacked);
        multiplyBlocks(aPacked, bPacked, y, n, r0, rows, c0, cols, depth, p0 > 0);
      }
    }
  }
  return true;
}

}  // namespace meshflow::runtime::cpu
