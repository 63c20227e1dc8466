// Fused attention on the host: out = softmax(mask(q · kᵀ · scale)) · v
// computed one query row at a time, keeping per row only the log-sum-exp of
// its scores — never the s × s scores or probabilities — and its backward
// recomputing the probabilities from q, k and that log-sum-exp (the
// arithmetic of FlashAttention, Dao et al. 2022; rows are not tiled here).
// Unlike FlashAttention-2 the backward does not read the forward's result:
// softmax's row term Σ_j p_j · (dOut · v_j) is summed from the recomputed
// probabilities (one more pass over a row's keys), so that what a plan
// prices a fused attention's backward to read — q, k, v — is all it keeps
// (passes/FusedKernels.h), with the log-sum-exp, r floats per row block.
// This is the kernel a plan priced with fused attention
// (passes/FusedKernels.h, `gpu(..., fused_kernels = true)`) stands for: the
// reference the runtime's fused attention and the cuda backend's kernels are
// checked against (docs/cuda.md, "What is missing").
//
// Everything is computed in f32 from the operands' values (f16 and bf16
// widen exactly) and each result is rounded once to the operands' type, so
// in half precision the result is closer to the exact one than the unfused
// chain, which rounds the scores and the probabilities too: the two agree
// within the precision's tolerance, not to the bit. Sums run in a fixed order
// (keys ascending, then rows ascending), so the bits are the same every run.
#pragma once

#include "runtime/Tensor.h"

namespace meshflow::runtime::cpu {

struct AttentionOptions {
  double scale = 1.0;   ///< The factor on q · kᵀ (1 / sqrt(d) in a transformer).
  bool causal = false;  ///< Query row i sees keys 0..(i mod s) only.
};

struct AttentionResult {
  Tensor out;  ///< [..., r, d] in q's dtype.
  Tensor lse;  ///< [..., r] f32: per query row, log Σ_j exp(score_j) over the keys it sees.
};

struct AttentionGrads {
  Tensor dq, dk, dv;  ///< The shapes and dtype of q, k and v.
};

/// q [..., r, d]; k and v [..., s, d] with q's leading dimensions and dtype (f32,
/// f16 or bf16). Causal attention needs r a multiple of s: grouped queries lay
/// the rows of a group's heads end to end, so row i is at position i mod s
/// (stdlib/layers.mesh, grouped_query_attention). Throws std::invalid_argument
/// naming the shapes otherwise.
AttentionResult fusedAttention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionOptions& options);

/// The gradients of fusedAttention's `out` given dOut (out's shape and dtype),
/// from q, k, v and the forward's lse.
AttentionGrads fusedAttentionGrad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dOut,
                                  const Tensor& lse, const AttentionOptions& options);

}  // namespace meshflow::runtime::cpu
