// Strategies of the attention pieces that are not matmuls: causal_mask and scale.
// Both are element-wise over the scores [batch, heads, s, s]: a device masks its
// own tile knowing the tile's offsets, so every dimension may be split (the
// batch and heads splits are Megatron's; the sequence splits are sequence
// parallelism). The score and context matmuls are batched matmuls (MatMul.cpp),
// split_heads and merge_heads are layout ops (Layout.cpp).
#include "passes/strategies/Einsum.h"

namespace meshflow::passes {

LoopNest broadcastLoops(const OpContext& ctx);

std::vector<Strategy> attentionStrategies(const OpContext& ctx) {
  return loopNestStrategies(ctx, broadcastLoops(ctx));
}

}  // namespace meshflow::passes
