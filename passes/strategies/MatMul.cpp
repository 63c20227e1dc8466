// Strategies of matmul (and so of linear layers): the loops of
// y[..., m, n] = a[..., m, k] · b[(...,) k, n]. Every assignment of the two mesh
// axes to the loops gives all of Alpa's dot-handler strategies:
//   SS = SR x RS      m on one axis, n on the other (no communication);
//   SR = SS x SR      m and k: the output is all-reduced over k's axis;
//   RS = RS x SS      k and n: all-reduced over k's axis;
//   batch strategies  a batch loop of a batched matmul on one or both axes;
//   1-D strategies    one axis used, the other idle; 1-D mixed: both axes on one
//                     loop (S01R = S01R x RR, RS01 = RR x RS01, RR = RS01 x S01R);
//   data parallel     the batch (first) loop of a on every axis, b replicated: the
//                     weight gradient is all-reduced (or reduce-scattered, ZeRO);
//   Megatron          column parallel RS = RR x RS (n split) and row parallel
//                     RR = RS x SR (k split, all-reduce of the output).
// The backward is priced with the forward: a's gradient sums over n, b's over m
// and a's other unbatched loops, so splitting those costs an all-reduce of the
// gradient (only when that input needs one).
#include "passes/strategies/Einsum.h"

namespace meshflow::passes {

std::vector<Strategy> matmulStrategies(const OpContext& ctx) {
  auto a = ctx.inputShape(0), b = ctx.inputShape(1);
  int ra = static_cast<int>(a.size()), rb = static_cast<int>(b.size());
  bool transposeA = ir::flagAttr(ctx.op(), "transpose_a"), transposeB = ir::flagAttr(ctx.op(), "transpose_b");
  bool batched = rb == ra && ra > 2;
  int kDimA = transposeA ? ra - 2 : ra - 1, mDimA = transposeA ? ra - 1 : ra - 2;
  int kDimB = transposeB ? rb - 1 : rb - 2;
  int nDimB = transposeB ? rb - 2 : rb - 1;
  LoopNest nest;
  // Leading loops are shared with b when it is batched.
  for (int i = 0; i < ra - 2; ++i) nest.loops.push_back(loopOver(a[i], {i, batched ? i : -1}, {i}));
  nest.loops.push_back(loopOver(a[mDimA], {mDimA, -1}, {ra - 2}));     // m
  nest.loops.push_back(loopOver(a[kDimA], {kDimA, kDimB}, {-1}));      // k: contracted
  nest.loops.push_back(loopOver(b[nDimB], {-1, nDimB}, {ra - 1}));     // n
  return loopNestStrategies(ctx, nest);
}

}  // namespace meshflow::passes
