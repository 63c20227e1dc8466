// Strategies of cross_entropy: loss = mean over positions of −log softmax(logits)
// at the label. Loops: each position dimension (shared by logits and labels) and
// the vocabulary. Split positions leave each device the loss of its positions, a
// partial sum kept as such: the loss is only reported, and its gradient (1 /
// positions per position) needs no communication. A split vocabulary is
// Megatron's vocabulary-parallel cross entropy: the row max, the target logit
// and the sum of exponentials (three fp32 numbers per position) are all-reduced.
#include "passes/strategies/Einsum.h"

namespace meshflow::passes {

std::vector<Strategy> crossEntropyStrategies(const OpContext& ctx) {
  auto logits = ctx.inputShape(0);
  int r = static_cast<int>(logits.size());
  double positions = 1;
  LoopNest nest;
  for (int d = 0; d + 1 < r; ++d) {
    positions *= double(logits[d]);
    Loop loop = loopOver(logits[d], {d, d}, {-1});
    loop.contraction = Loop::Contraction::kKeepPartial;
    nest.loops.push_back(loop);
  }
  Loop vocab = loopOver(logits[r - 1], {r - 1, -1}, {-1});
  vocab.contraction = Loop::Contraction::kStatistics;
  vocab.statisticsBytes = 3 * 4 * positions;
  nest.loops.push_back(vocab);
  return loopNestStrategies(ctx, nest);
}

}  // namespace meshflow::passes
