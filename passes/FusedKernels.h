// The kernels a GPU training stack fuses across several ops of the graph, for
// the cost model of a device whose DeviceSpec::fusedKernels says it runs them
// (docs/planning.md, "Fused kernels"):
//
// - attention, FlashAttention (Dao et al. 2022; FlashAttention-2, Dao 2023):
//   matmul(q, kᵀ) → scale → causal mask → softmax → matmul(·, v) as one kernel.
//   The s × s scores never reach device memory: the kernel reads q, k and v
//   and writes the output; its backward reads them again and recomputes the
//   scores (5 matrix products of the scores' size against the 4 of an unfused
//   backward). Under a causal mask it skips the blocks above the diagonal,
//   half of the products' work.
// - RMSNorm (Megatron-LM's and Apex's fused RMSNorm): x · rsqrt(mean(x²) + ε) ·
//   gain as one kernel that keeps its input and the per-row rsqrt for its
//   backward, not the intermediates.
// - SwiGLU's gate (Megatron-LM's fused swiglu): silu(gate) · up as one kernel
//   that keeps gate and up and recomputes the sigmoid in its backward.
//
// A value is internal to a fused kernel when an op of the kernel makes it and
// only ops of the same kernel read it: it costs no memory traffic and is not
// kept for the backward.
#pragma once

#include <cstdint>
#include <vector>

#include "ir/Graph.h"

namespace meshflow::passes {

enum class FusedKind : std::uint8_t { kNone, kAttention, kRmsNorm, kSwiGlu };

struct FusedKernels {
  /// Per op: the fused kernel it belongs to, kNone for an op run on its own.
  std::vector<FusedKind> kindOfOp;
  /// Per op: the matrix products of an attention kernel with a causal mask.
  std::vector<bool> causalProduct;
  /// Per value: internal to one fused kernel.
  std::vector<bool> internal;
  /// Per value: internal, yet what the fused backward reads (RMSNorm's rsqrt).
  std::vector<bool> keptForBackward;

  bool fused(ir::OpId id) const { return id < kindOfOp.size() && kindOfOp[id] != FusedKind::kNone; }
  bool isInternal(ir::ValueId v) const { return v < internal.size() && internal[v]; }
};

/// The work of an attention kernel's two matrix products (q·kᵀ and p·v) as a
/// factor of the unfused products' FLOPs. FlashAttention's backward recomputes
/// the scores: 5 products against the unfused backward's 4 (forward 2). Under
/// a causal mask it skips the blocks above the diagonal (FlashAttention-2, §3.1),
/// half of each product. The model's FLOPs (MFU) still count the whole
/// products, as Megatron-LM's and PaLM's formulas do.
struct FusedProductWork {
  double forward = 1;
  double backward = 1;
};
FusedProductWork fusedProductWork(bool causal);

/// Finds the fused kernels of `graph` by the patterns above (the ops the
/// standard library's self_attention, grouped-query attention, rms_norm and
/// swiglu trace to).
FusedKernels findFusedKernels(const ir::Graph& graph);

/// What a stack with these kernels keeps for the backward: `readByBackward`
/// (per value, as the unfused runtime's stash holds it) less the values
/// internal to a fused kernel, except those its backward reads.
void keepWhatFusedKernelsRead(const FusedKernels& fused, std::vector<bool>& readByBackward);

}  // namespace meshflow::passes
