// Strategies of layout ops: reshape, transpose, split_heads, merge_heads, split,
// concat, select. They move no data when the split follows the layout, so each
// is a set of loops mapping input dimensions to output dimensions:
// - transpose: dimension perm[j] of x is dimension j of y;
// - split_heads x[b, s, H·d] → y[b, H, s, d]: loops b, s and the heads (the
//   major part of x's last dimension); merge_heads is the inverse;
// - reshape: dimensions are grouped where the running element counts agree; a
//   group may be split on its major dimension (n pieces of the flattened group
//   are the same elements on both sides when n divides both major dimensions);
// - split and concat: every dimension but the axis is shared by all pieces. A
//   split may also cut its axis when every part divides evenly: each device then
//   holds its slice of every part, which is the layout of a fused QKV weight whose
//   columns are stored interleaved per shard, as Megatron stores them. Such
//   strategies are tagged "[interleaved]" and the lowering must lay the
//   producing weight out that way;
// - select drops its axis, which stays whole.
#include <numeric>

#include "passes/strategies/Einsum.h"

namespace meshflow::passes {

namespace {

std::int64_t intAttr(const ir::Op& op, const char* name, std::int64_t fallback) {
  auto it = op.attrs.find(name);
  return it == op.attrs.end() ? fallback : std::get<std::int64_t>(it->second);
}

LoopNest reshapeLoops(const OpContext& ctx) {
  auto x = ctx.inputShape(0), y = ctx.outputShape(0);
  LoopNest nest;
  std::size_t i = 0, j = 0;
  while (i < x.size() && j < y.size()) {
    std::size_t i0 = i, j0 = j;
    std::int64_t px = x[i++], py = y[j++];
    while (px != py) {
      if (px < py && i < x.size()) {
        px *= x[i++];
      } else if (j < y.size()) {
        py *= y[j++];
      } else {
        break;
      }
    }
    if (px != py) break;
    nest.loops.push_back(loopOver(std::gcd(x[i0], y[j0]), {int(i0)}, {int(j0)}));
  }
  return nest;
}

LoopNest transposeLoops(const OpContext& ctx) {
  auto perm = std::get<std::vector<std::int64_t>>(ctx.op().attrs.at("perm"));
  auto y = ctx.outputShape(0);
  LoopNest nest;
  for (int j = 0; j < static_cast<int>(perm.size()); ++j) {
    nest.loops.push_back(loopOver(y[j], {int(perm[j])}, {j}));
  }
  return nest;
}

LoopNest headLoops(const OpContext& ctx, bool split) {
  // split_heads: x[b, s, H·d] → y[b, H, s, d]; merge_heads the other way.
  auto y = ctx.outputShape(0);
  LoopNest nest;
  if (split) {
    nest.loops = {loopOver(y[0], {0}, {0}), loopOver(y[2], {1}, {2}), loopOver(y[1], {2}, {1})};
  } else {
    auto x = ctx.inputShape(0);
    nest.loops = {loopOver(x[0], {0}, {0}), loopOver(x[2], {2}, {1}), loopOver(x[1], {1}, {2})};
  }
  return nest;
}

LoopNest piecesLoops(const OpContext& ctx, bool split, bool cutAxis) {
  const ir::Op& op = ctx.op();
  auto whole = split ? ctx.inputShape(0) : ctx.outputShape(0);
  int axis = static_cast<int>(intAttr(op, "axis", 0));
  std::size_t pieces = split ? op.outputs.size() : op.inputs.size();
  LoopNest nest;
  for (int d = 0; d < static_cast<int>(whole.size()); ++d) {
    if (d == axis && !cutAxis) continue;
    std::vector<int> many(pieces, d);
    nest.loops.push_back(split ? loopOver(whole[d], {d}, many) : loopOver(whole[d], many, {d}));
  }
  if (cutAxis) nest.tag = " [interleaved]";
  return nest;
}

LoopNest selectLoops(const OpContext& ctx) {
  auto x = ctx.inputShape(0);
  int axis = static_cast<int>(intAttr(ctx.op(), "axis", static_cast<std::int64_t>(x.size()) - 1));
  if (axis < 0) axis += static_cast<int>(x.size());
  LoopNest nest;
  int out = 0;
  for (int d = 0; d < static_cast<int>(x.size()); ++d) {
    if (d == axis) continue;
    nest.loops.push_back(loopOver(x[d], {d}, {out++}));
  }
  return nest;
}

}  // namespace

std::vector<Strategy> layoutStrategies(const OpContext& ctx) {
  switch (ctx.op().kind) {
    case ir::OpKind::Reshape:
      return loopNestStrategies(ctx, reshapeLoops(ctx));
    case ir::OpKind::Transpose:
      return loopNestStrategies(ctx, transposeLoops(ctx));
    case ir::OpKind::SplitHeads:
      return loopNestStrategies(ctx, headLoops(ctx, true));
    case ir::OpKind::MergeHeads:
      return loopNestStrategies(ctx, headLoops(ctx, false));
    case ir::OpKind::Split: {
      std::vector<Strategy> all = loopNestStrategies(ctx, piecesLoops(ctx, true, false));
      for (Strategy& s : loopNestStrategies(ctx, piecesLoops(ctx, true, true))) {
        all.push_back(std::move(s));
      }
      return deduplicated(std::move(all));
    }
    case ir::OpKind::Concat:
      return loopNestStrategies(ctx, piecesLoops(ctx, false, false));
    case ir::OpKind::Select:
      return loopNestStrategies(ctx, selectLoops(ctx));
    default:
      return replicatedStrategy(ctx);
  }
}

}  // namespace meshflow::passes
