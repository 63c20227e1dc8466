// Strategies of embedding: y[..., h] = table[ids[...], h]. Loops: each ids
// dimension (data parallel; the table's gradient is then a partial sum, the
// embedding's data-parallel all-reduce), h (the table split by columns, no
// communication), and the vocabulary V (Megatron's vocabulary-parallel
// embedding: each device looks up the rows it holds, zeros elsewhere, and the
// output is all-reduced).
#include "passes/strategies/Einsum.h"

namespace meshflow::passes {

std::vector<Strategy> embeddingStrategies(const OpContext& ctx) {
  auto table = ctx.inputShape(0), ids = ctx.inputShape(1);
  int r = static_cast<int>(ids.size());
  LoopNest nest;
  for (int d = 0; d < r; ++d) nest.loops.push_back(loopOver(ids[d], {-1, d}, {d}));
  nest.loops.push_back(loopOver(table[1], {1, -1}, {r}));
  nest.loops.push_back(loopOver(table[0], {0, -1}, {-1}));
  return loopNestStrategies(ctx, nest);
}

}  // namespace meshflow::passes
