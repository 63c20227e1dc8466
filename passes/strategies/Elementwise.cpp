// Strategies of element-wise ops (add, sub, mul, div, and the unary ones: neg,
// relu, gelu, tanh, sigmoid, exp, dropout): one loop per output dimension, each
// input following the output where it has that dimension. A broadcast input (a
// bias [n] added to [batch, n]) lacks the loops it is broadcast over, so splitting
// them makes its gradient a partial sum: the bias's data-parallel all-reduce.
#include "passes/strategies/Einsum.h"

namespace meshflow::passes {

/// Loops over every output dimension; inputs aligned NumPy-style from the right,
/// broadcast (size-1 or missing) dimensions left out.
LoopNest broadcastLoops(const OpContext& ctx) {
  auto out = ctx.outputShape(0);
  int r = static_cast<int>(out.size());
  LoopNest nest;
  for (int d = 0; d < r; ++d) {
    Loop loop = loopOver(out[d], {}, {d});
    for (std::size_t i = 0; i < ctx.op().inputs.size(); ++i) {
      auto in = ctx.inputShape(i);
      int offset = r - static_cast<int>(in.size());
      int dim = d - offset;
      bool present = dim >= 0 && in[dim] == out[d];
      loop.inputDims.push_back(present ? dim : -1);
    }
    nest.loops.push_back(loop);
  }
  return nest;
}

std::vector<Strategy> elementwiseStrategies(const OpContext& ctx) {
  return loopNestStrategies(ctx, broadcastLoops(ctx));
}

}  // namespace meshflow::passes
