// SPMD rules: for one op of a training graph and the specs its inputs are held
// in on a stage's logical mesh, the specs its inputs must be resharded to so
// that the op's local kernel on each device's boxes computes a box of its
// outputs, and the specs of those outputs (docs/runtime.md, "SPMD execution").
//
// - MatMul (forward and backward alike): the loops of y = a·b keep their mesh
//   axes; b follows a on the shared loops (contracted k, batch), its own n loop
//   keeps its axes when they are free; a contracted loop split over axes X
//   makes y a partial sum over X (a row-parallel matmul's all-reduce is the
//   reshard of that partial sum; a column-parallel matmul's backward gives its
//   input gradient as a partial sum, Megatron's "f").
// - Element-wise ops keep their operand's layout; an operand broadcast along a
//   dimension holds it whole. Add, Sub, Neg and Scale are linear and pass
//   partial sums through when every operand is the same partial sum.
// - Activation gradients take the forward value's layout.
// - Optimizer updates run on the parameter's layout; the gradient is resharded
//   to it (the data-parallel all-reduce when it is a partial sum).
// - Mixture-of-experts dispatch, combine and their gradients split tokens and
//   gates over the batch (whole groups), the gates and slot tensors over the
//   experts, tokens and slots over the hidden dimension; a combine's output is
//   a partial sum over the expert split. The batch split follows the gates, so
//   slots held split over the experts are resharded to the batch split by an
//   all-to-all (expert parallelism).
// - Row-wise ops (softmax, the causal mask, layer norm, the heads' layout,
//   reshape, split and concat off dimension 0, and the gradients of softmax,
//   the mask, layer norm, embedding and broadcasting over the batch) take the
//   dimension-0 split of their leading operand: each device runs its rows.
//   What they sum over the rows (layer norm's dgamma and dbeta, an embedding
//   table's gradient, a bias gradient) is a partial sum over the split.
// - Every other op runs whole on every device (its inputs gathered to
//   replicated): always correct, not parallel. Dropout must be among them: its
//   mask hashes the element's index in the whole tensor; so must cross
//   entropy and its gradient, whose mean divides by the positions it sees.
//   An unplanned op run whole has its outputs cut locally (no communication)
//   to the layout of an input of the same shape (cutTarget), so that a
//   backward keeps the forward's split instead of holding whole gradients.
// A planned forward op takes the input specs of its strategy; its outputs are
// then resharded to the strategy's output specs by the caller.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/Graph.h"
#include "ir/Sharding.h"

namespace meshflow::runtime {

/// The layouts one op runs in: what its inputs must be resharded to, and what
/// its local kernel's outputs then are.
struct SpmdLayout {
  std::vector<ir::ShardingSpec> inputs;
  std::vector<ir::ShardingSpec> outputs;
};

/// The layout of `op` given the specs its inputs are `held` in and the global
/// shapes of its inputs and outputs; `planned` are the input specs a plan's
/// strategy gives a forward op (empty: none). The result always validates
/// against the shapes and mesh.
SpmdLayout spmdLayout(const ir::Op& op, const std::vector<ir::ShardingSpec>& held,
                      const std::vector<std::vector<std::int64_t>>& inputShapes,
                      const std::vector<std::vector<std::int64_t>>& outputShapes,
                      const std::vector<ir::ShardingSpec>& planned, const ir::LogicalMesh& mesh);

/// Where an unplanned op that ran whole keeps an output of `outputShape`: the
/// spec of the first input of that very shape `held` split (no partial sum),
/// else replicated — a local cut of the whole result.
ir::ShardingSpec cutTarget(const std::vector<ir::ShardingSpec>& held,
                           const std::vector<std::vector<std::int64_t>>& inputShapes,
                           const std::vector<std::int64_t>& outputShape);

}  // namespace meshflow::runtime
