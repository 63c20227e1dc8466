// runtime::AttentionGroup — an attention of a training graph that a plan
// priced as one fused kernel (passes/FusedKernels.h, a device with
// `fused_kernels = true`) and that the executor then runs as one: the forward
//
//   MatMul(q, kᵀ) → [Reshape] → [Scale] → [CausalMask] → Softmax → [Reshape] → MatMul(·, v)
//
// (the ops the standard library's self_attention and grouped_query_attention
// trace to) as cpu::fusedAttention's arithmetic, and the backward autodiff
// gives it — MatMul(dOut, vᵀ) and MatMul(pᵀ, dOut), [Reshape], SoftmaxGrad,
// [CausalMaskGrad], [Scale], [Reshape], MatMul(ds, k) and MatMul(dsᵀ, q) — as
// fusedAttentionGrad. The s × s scores and probabilities are never made: the
// slot of the probabilities the backward reads (`probs`) holds the forward's
// per-row log-sum-exp instead, which the backward reads to recompute them.
//
// Found only where that is exact: both runs of ops consecutive in the graph,
// every intermediate read by nothing but the group (the probabilities by the
// two runs only), no graph output among them, q, k and v of one float type
// with k and v of one shape. Anything else runs op by op.
#pragma once

#include <map>
#include <optional>
#include <span>
#include <vector>

#include "ir/Graph.h"
#include "runtime/FusedOps.h"

namespace meshflow::runtime {

struct AttentionGroup {
  std::vector<ir::OpId> forward;   ///< Consecutive op ids, in order.
  std::vector<ir::OpId> backward;  ///< Consecutive op ids, in order.
  ir::ValueId q = 0, k = 0, v = 0;  ///< What MatMul(q, kᵀ) and MatMul(·, v) read.
  ir::ValueId out = 0;              ///< The attention's result.
  /// The probabilities as the last MatMul reads them, and as the softmax
  /// made them (the same value without a reshape between): both slots hold
  /// the log-sum-exp from the forward to the backward (the stash lists both).
  ir::ValueId probs = 0, softmaxOut = 0;
  ir::ValueId dOut = 0;                ///< The backward's incoming gradient.
  ir::ValueId dq = 0, dk = 0, dv = 0;  ///< What the backward gives on.
  double scale = 1.0;
  bool causal = false;
};

/// Every attention of `graph` (a training graph: forward, then backward ops)
/// that can run fused, in the order of their forward ops.
std::vector<AttentionGroup> findAttentionGroups(const ir::Graph& graph, const ValueReaders& readers);

/// The attentions a runner (OpRunner, SpmdRunner) runs fused, by op.
class FusedAttentions {
 public:
  void set(std::vector<AttentionGroup> groups);
  const std::vector<AttentionGroup>& groups() const { return groups_; }
  bool empty() const { return groups_.empty(); }

  struct Run {
    const AttentionGroup* group = nullptr;
    bool backward = false;
    std::size_t count = 0;  ///< The ops it takes: ops[i], ..., ops[i + count - 1].
  };
  /// The fused forward or backward that ops[i] starts; none when ops[i] is in
  /// no group. Throws std::runtime_error when ops[i] is in a group whose run
  /// is not ops[i], ops[i + 1], ... in order (an op run apart from its group).
  std::optional<Run> at(const ir::Graph& graph, std::span<const ir::OpId> ops, std::size_t i) const;

 private:
  std::vector<AttentionGroup> groups_;
  std::map<ir::OpId, std::size_t> groupOfOp_;
};

}  // namespace meshflow::runtime
