// Strategies of the mixture-of-experts ops (docs/sharding.md, "Expert
// parallelism"). Routing is per group (a row b of the batch) and per expert,
// so tokens x[B, S, h] and gates[B, S, E] may be split over B and h, and the
// gates over E; the slot tensor [E, B*capacity, h] follows (B as blocks of
// whole groups). The sequence S stays whole: a token's slot depends on the
// tokens before it. As loop nests:
//   dispatch  B (x, gates; slots dim 1), E (gates; slots dim 0: x's gradient is
//             a partial sum over it), h (x; slots dim 2);
//   combine   B (slots dim 1, gates; out), E (slots dim 0, gates; contracted:
//             the output is all-reduced), h (slots dim 2; out: the gates'
//             gradient is a partial sum over it).
// Expert parallelism adds one strategy per mesh axis (or both): tokens and
// gates split over the batch, the slot tensor over the experts, with the
// all-to-all between the two layouts inside the op. Dispatch sends each
// device's slots to the devices holding their experts; combine sends them
// back; each prices its all-to-all twice, once for the forward and once for
// the gradient going the other way.
#include <fmt/format.h>

#include "passes/Collectives.h"
#include "passes/strategies/Einsum.h"

namespace meshflow::passes {
namespace {

using ir::MeshAxes;
using ir::ShardingSpec;

LoopNest dispatchLoops(const OpContext& ctx) {
  auto x = ctx.inputShape(0), gates = ctx.inputShape(1);
  LoopNest nest;
  nest.loops.push_back(loopOver(x[0], {0, 0}, {1}));       // B: whole groups
  nest.loops.push_back(loopOver(gates[2], {-1, 2}, {0}));  // E
  nest.loops.push_back(loopOver(x[2], {2, -1}, {2}));      // h
  return nest;
}

LoopNest combineLoops(const OpContext& ctx) {
  auto slots = ctx.inputShape(0), gates = ctx.inputShape(1);
  LoopNest nest;
  nest.loops.push_back(loopOver(gates[0], {1, 0}, {0}));   // B
  nest.loops.push_back(loopOver(gates[2], {0, 2}, {-1}));  // E: summed by the combine
  nest.loops.push_back(loopOver(slots[2], {2, -1}, {2}));  // h
  return nest;
}

std::string axisText(MeshAxes axes) {
  return axes == MeshAxes::k0 ? "0" : axes == MeshAxes::k1 ? "1" : "01";
}

// The expert-parallel strategy over `axes`: every tensor split over dimension
// 0 (the batch of tokens and gates, the experts of the slot tensor), with an
// all-to-all of the slot tensor each way. False when a split does not divide.
bool expertParallel(const OpContext& ctx, MeshAxes axes, Strategy& s) {
  const ir::Op& op = ctx.op();
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    s.inputs.push_back(ShardingSpec::split(ctx.inputShape(i).size(), 0, axes));
    if (!s.inputs.back().fits(ctx.inputShape(i), ctx.mesh)) return false;
  }
  s.outputs.push_back(ShardingSpec::split(ctx.outputShape(0).size(), 0, axes));
  if (!s.outputs.back().fits(ctx.outputShape(0), ctx.mesh)) return false;
  // The slot tensor is dispatch's output and combine's input 0; every device
  // holds 1/n of it before and after the exchange.
  bool dispatch = op.kind == ir::OpKind::MoeDispatch;
  auto slots = dispatch ? ctx.outputShape(0) : ctx.inputShape(0);
  double bytes = dispatch ? ctx.outputBytesPerElement(0) : ctx.inputBytesPerElement(0);
  for (std::int64_t d : slots) bytes *= double(d);
  std::int64_t n = ctx.mesh.devices(axes);
  s.communication = 2 * collectiveCost(Collective::kAllToAll, bytes / double(n), axes, ctx.mesh);
  s.parallelism = n;
  s.gradientSync.assign(op.inputs.size(), MeshAxes::kNone);
  s.name = strategyName(s.inputs, s.outputs) + fmt::format(" [all-to-all {}]", axisText(axes));
  return true;
}

std::vector<Strategy> expertParallelStrategies(const OpContext& ctx) {
  std::vector<Strategy> out;
  bool split0 = ctx.mesh.shape[0] > 1, split1 = ctx.mesh.shape[1] > 1;
  for (MeshAxes axes : {MeshAxes::k0, MeshAxes::k1, MeshAxes::k01}) {
    if ((ir::hasAxis(axes, 0) && !split0) || (ir::hasAxis(axes, 1) && !split1)) continue;
    Strategy s;
    if (expertParallel(ctx, axes, s)) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<Strategy> moeStrategies(const OpContext& ctx) {
  if (ctx.op().kind == ir::OpKind::MoeDropped) return replicatedStrategy(ctx);
  bool dispatch = ctx.op().kind == ir::OpKind::MoeDispatch;
  // Dispatch's gates only choose slots: no gradient reaches them through it,
  // so splits they lack cost no gradient all-reduce.
  OpContext local = ctx;
  if (dispatch) local.inputNeedsGradient.at(1) = false;
  std::vector<Strategy> all =
      loopNestStrategies(local, dispatch ? dispatchLoops(local) : combineLoops(local));
  for (Strategy& s : expertParallelStrategies(ctx)) all.push_back(std::move(s));
  return deduplicated(std::move(all));
}

}  // namespace meshflow::passes
