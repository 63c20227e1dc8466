// The dispatch from op kind to strategy family, the strategies of the graph's
// leaves, and the replicated fallback.
#include <fmt/format.h>

#include <algorithm>

#include "passes/strategies/Einsum.h"

namespace meshflow::passes {

namespace {

std::vector<std::int64_t> concrete(const ir::TensorType& t, std::int64_t batch) {
  std::vector<std::int64_t> shape;
  for (const ir::Dim& d : t.shape) shape.push_back(d.resolve(batch));
  return shape;
}

}  // namespace

std::vector<std::int64_t> OpContext::inputShape(std::size_t i) const {
  return concrete(graph.value(op().inputs.at(i)).type, batch);
}
std::vector<std::int64_t> OpContext::outputShape(std::size_t i) const {
  return concrete(graph.value(op().outputs.at(i)).type, batch);
}
double OpContext::inputBytesPerElement(std::size_t i) const {
  return double(ir::dtypeBytes(graph.value(op().inputs.at(i)).type.dtype));
}
double OpContext::outputBytesPerElement(std::size_t i) const {
  return double(ir::dtypeBytes(graph.value(op().outputs.at(i)).type.dtype));
}

std::vector<Strategy> leafStrategies(const OpContext& ctx) {
  auto shape = ctx.outputShape(0);
  LoopNest nest;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    nest.loops.push_back(loopOver(shape[d], {}, {d}));
  }
  std::vector<Strategy> all = loopNestStrategies(ctx, nest);
  if (ctx.op().kind == ir::OpKind::Input) {
    // Among equal objectives the solver keeps the lowest-numbered strategy; for
    // data that is the most sharded one, so each device loads only its slice.
    std::stable_sort(all.begin(), all.end(), [&](const Strategy& a, const Strategy& b) {
      return a.outputs[0].shardCount(ctx.mesh) > b.outputs[0].shardCount(ctx.mesh);
    });
  }
  return all;
}

std::vector<Strategy> replicatedStrategy(const OpContext& ctx) {
  Strategy s;
  const ir::Op& op = ctx.op();
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    s.inputs.push_back(ir::ShardingSpec::replicated(ctx.inputShape(i).size()));
  }
  for (std::size_t o = 0; o < op.outputs.size(); ++o) {
    s.outputs.push_back(ir::ShardingSpec::replicated(ctx.outputShape(o).size()));
  }
  s.gradientSync.assign(op.inputs.size(), ir::MeshAxes::kNone);
  s.name = strategyName(s.inputs, s.outputs) + " [replicated]";
  return {s};
}

std::vector<Strategy> strategiesFor(const OpContext& ctx) {
  using K = ir::OpKind;
  switch (ctx.op().kind) {
    case K::Input:
    case K::Parameter:
      return leafStrategies(ctx);
    case K::MatMul:
      return matmulStrategies(ctx);
    case K::Add:
    case K::Sub:
    case K::Mul:
    case K::Div:
    case K::Neg:
    case K::Relu:
    case K::Gelu:
    case K::Tanh:
    case K::Sigmoid:
    case K::Exp:
    case K::Rsqrt:
    case K::Dropout:
    case K::Cast:
      return elementwiseStrategies(ctx);
    case K::Scale:
    case K::CausalMask:
      return attentionStrategies(ctx);
    case K::Softmax:
    case K::LayerNorm:
    case K::Sum:
    case K::Mean:
    case K::TopKGate:
      return reductionStrategies(ctx);
    case K::MoeDispatch:
    case K::MoeCombine:
    case K::MoeDropped:
      return moeStrategies(ctx);
    case K::Embedding:
      return embeddingStrategies(ctx);
    case K::CrossEntropy:
      return crossEntropyStrategies(ctx);
    case K::Reshape:
    case K::Transpose:
    case K::SplitHeads:
    case K::MergeHeads:
    case K::Split:
    case K::Concat:
    case K::Select:
      return layoutStrategies(ctx);
    default:
      return replicatedStrategy(ctx);
  }
}

}  // namespace meshflow::passes
