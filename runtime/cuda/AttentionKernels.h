// The CUDA kernels of a fused attention (runtime/AttentionGroups.h): the GPU
// twin of cpu::fusedAttention and cpu::fusedAttentionGrad
// (runtime/cpu/FusedAttention.h), FlashAttention's arithmetic (Dao et al.
// 2022) on tiles of query rows and keys in shared memory — no s × s buffer
// in device memory, only the per-row log-sum-exp and, in the backward, the
// per-row term Σ_j p_ij · (dOut_i · v_j) (r floats per batch).
//
// Operands f32, f16 or bf16 (`format`), read as f32; everything computed in
// f32 and each result rounded once to the format, as the cpu reference does.
// Every sum runs in an order fixed by the sizes alone (no atomics), so the
// bits are the same every run; they differ from the cpu reference's by
// summation order (the forward rescales a running sum per key tile, the
// row term adds 32 lane sums in a tree) and CUDA's expf against std::exp.
#pragma once

#include <cstdint>

#include "runtime/cuda/Kernels.h"

namespace meshflow::runtime::cuda {

/// The largest head dimension d the kernels take (a thread keeps d / 32
/// accumulators per row in registers); CudaKernels leaves larger ones to the host.
constexpr std::int64_t kMaxAttentionHeadDim = 128;

/// One call's sizes: n batches (q's leading dimensions) of r query rows
/// against s keys of d features; query row i sees keys 0..(i mod s) when causal.
struct AttentionSizes {
  std::int64_t n = 0, r = 0, s = 0, d = 0;
  float scale = 1;
  bool causal = false;
};

/// out [n, r, d] (format) and lse [n, r] (f32) from q [n, r, d], k and v [n, s, d].
/// Throws std::invalid_argument (before any launch) for sizes the kernels do
/// not take: d outside 1..kMaxAttentionHeadDim, s = 0 with r > 0, causal with
/// r not a multiple of s, or a null pointer where elements are.
void attentionForward(FloatFormat format, const void* q, const void* k, const void* v, void* out, float* lse,
                      const AttentionSizes& sizes, Stream stream);

/// dq [n, r, d], dk and dv [n, s, d] (format) from q, k, v, dOut [n, r, d] and
/// the forward's lse; `rowTerm` is scratch of n · r floats.
void attentionBackward(FloatFormat format, const void* q, const void* k, const void* v, const void* dOut,
                       const float* lse, float* rowTerm, void* dq, void* dk, void* dv, const AttentionSizes& sizes,
                       Stream stream);

}  // namespace meshflow::runtime::cuda
