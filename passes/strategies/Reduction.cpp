// Strategies of reductions and normalisations: softmax and layer_norm normalise
// over the last dimension, which stays whole (splitting it would need an
// all-reduce of statistics inside the op on every use, which Megatron avoids);
// every other dimension may be split. layer_norm's gamma and beta span only the
// last dimension, so splitting rows makes their gradients partial sums
// (all-reduced). sum and mean may split a reduced axis: the output is then a
// partial sum, all-reduced by the op. top_k_gate is treated like softmax.
#include <algorithm>

#include "passes/strategies/Einsum.h"

namespace meshflow::passes {

namespace {

// Loops over every dimension of x but the last; gamma and beta (if any) lack them.
LoopNest rowLoops(const OpContext& ctx) {
  auto x = ctx.inputShape(0);
  LoopNest nest;
  for (int d = 0; d + 1 < static_cast<int>(x.size()); ++d) {
    std::vector<int> inputs(ctx.op().inputs.size(), -1);
    inputs[0] = d;
    nest.loops.push_back(loopOver(x[d], inputs, {d}));
  }
  return nest;
}

LoopNest reduceLoops(const OpContext& ctx) {
  auto x = ctx.inputShape(0);
  std::vector<std::int64_t> axes = std::get<std::vector<std::int64_t>>(ctx.op().attrs.at("axes"));
  for (auto& a : axes) {
    if (a < 0) a += static_cast<std::int64_t>(x.size());
  }
  LoopNest nest;
  int out = 0;
  for (int d = 0; d < static_cast<int>(x.size()); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    nest.loops.push_back(loopOver(x[d], {d}, {reduced ? -1 : out}));
    if (!reduced) ++out;
  }
  return nest;
}

}  // namespace

std::vector<Strategy> reductionStrategies(const OpContext& ctx) {
  ir::OpKind kind = ctx.op().kind;
  if (kind == ir::OpKind::Sum || kind == ir::OpKind::Mean) {
    return loopNestStrategies(ctx, reduceLoops(ctx));
  }
  return loopNestStrategies(ctx, rowLoops(ctx));
}

}  // namespace meshflow::passes
