// The shape of training graphs: which backward ops each forward op gets, how
// gradients are accumulated, and that building is deterministic.
#include <catch2/catch.hpp>

#include "passes/Autodiff.h"
#include "tests/unit/autodiff/Checks.h"
#include "tests/unit/autodiff/Models.h"

namespace meshflow::autodiff_test {
namespace {

using ir::OpKind;
using ir::Phase;
using passes::buildTrainingGraph;
using passes::OptimizerConfig;
using Kinds = std::vector<OpKind>;

/// The `nth` forward op of `kind` (in op order).
ir::OpId find(const ir::Graph& g, OpKind kind, int nth = 0) {
  for (ir::OpId id = 0; id < g.ops().size(); ++id)
    if (g.op(id).phase == Phase::Forward && g.op(id).kind == kind && nth-- == 0) return id;
  FAIL("no forward op " << ir::opName(kind));
  return 0;
}

Kinds backwardKinds(const ir::Graph& g, ir::OpId forwardOp) {
  return kindsOf(g, madeFor(g, forwardOp, Phase::Backward));
}

/// The single backward op of `kind` made for `forwardOp`.
const ir::Op& backwardOp(const ir::Graph& g, ir::OpId forwardOp, OpKind kind) {
  const ir::Op* found = nullptr;
  for (ir::OpId id : madeFor(g, forwardOp, Phase::Backward))
    if (g.op(id).kind == kind) {
      REQUIRE(found == nullptr);
      found = &g.op(id);
    }
  REQUIRE(found != nullptr);
  return *found;
}

template <typename T>
T attr(const ir::Op& op, const std::string& name) {
  return std::get<T>(op.attrs.at(name));
}

ir::ValueId gradientOf(const passes::TrainingGraph& t, ir::ValueId param) {
  for (const auto& op : t.graph.ops())
    if ((op.kind == OpKind::AdamUpdate || op.kind == OpKind::SgdUpdate) && op.inputs[0] == param)
      return op.inputs[1];
  FAIL("no update for value " << param);
  return 0;
}

TEST_CASE("mlp: weight gradients only where a parameter is upstream", "[autodiff]") {
  ir::Graph forward = mlp();
  auto t = buildTrainingGraph(forward, OptimizerConfig::adam());
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;

  // x is an input, so fc1's matmul only computes dw = xᵀ·dy; fc2's also computes dh.
  ir::OpId fc1 = find(g, OpKind::MatMul, 0), fc2 = find(g, OpKind::MatMul, 1);
  // dw reads x in place: a MatMul with transpose_a, no Transpose op.
  CHECK(backwardKinds(g, fc1) == Kinds{OpKind::MatMul});
  CHECK(backwardKinds(g, fc2) == Kinds{OpKind::MatMul, OpKind::MatMul});
  const ir::Op& dw = g.op(madeFor(g, fc1, Phase::Backward)[0]);
  CHECK(attr<std::int64_t>(dw, "transpose_a") == 1);
  CHECK(dw.inputs[0] == g.op(fc1).inputs[0]);
  CHECK(g.value(dw.outputs[0]).type == g.value(g.op(fc1).inputs[1]).type);
  const ir::Op& dh = g.op(madeFor(g, fc2, Phase::Backward)[0]);
  CHECK(attr<std::int64_t>(dh, "transpose_b") == 1);
  CHECK(dh.inputs[1] == g.op(fc2).inputs[1]);
  CHECK(g.value(dh.outputs[0]).type.text() == "f32[batch, 8]");

  // The bias gradient is summed over the batch; relu's uses the relu input.
  ir::OpId bias = find(g, OpKind::Add, 0);
  CHECK(backwardKinds(g, bias) == Kinds{OpKind::ReduceToShape});
  CHECK(gradientOf(t, g.op(bias).inputs[1]) ==
        backwardOp(g, bias, OpKind::ReduceToShape).outputs[0]);
  ir::OpId relu = find(g, OpKind::Relu);
  CHECK(backwardOp(g, relu, OpKind::ReluGrad).inputs[0] == g.op(relu).inputs[0]);

  // out - y with y an input: dout = dy passes through, nothing is emitted.
  CHECK(backwardKinds(g, find(g, OpKind::Sub)).empty());
  // diff·diff: two products, summed into one gradient.
  CHECK(backwardKinds(g, find(g, OpKind::Mul)) == Kinds{OpKind::Mul, OpKind::Mul, OpKind::Add});

  // The loss seed, then mean over a symbolic batch: dy / (a sum of ones), broadcast.
  ir::OpId mean = find(g, OpKind::Mean);
  CHECK(backwardKinds(g, mean) == Kinds{OpKind::Constant, OpKind::Constant, OpKind::BroadcastTo,
                                        OpKind::Sum, OpKind::Div, OpKind::BroadcastTo});
  const ir::Op& seed = g.op(madeFor(g, mean, Phase::Backward)[0]);
  CHECK(attr<double>(seed, "value") == 1.0);
  CHECK(attr<double>(g.op(madeFor(g, mean, Phase::Backward)[1]), "value") == 1.0);
  CHECK(count(g, OpKind::MatMul, Phase::Backward) == 3);
}

TEST_CASE("attention: heads, softmax, masks, layer norm and a shared residual", "[autodiff]") {
  ir::Graph forward = attention();
  auto t = buildTrainingGraph(forward, OptimizerConfig::adamw());
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;

  // Split ↔ Concat, SplitHeads ↔ MergeHeads.
  const ir::Op& concat = backwardOp(g, find(g, OpKind::Split), OpKind::Concat);
  CHECK(concat.inputs.size() == 3);
  CHECK(attr<std::int64_t>(concat, "axis") == 2);
  for (int i = 0; i < 3; ++i)
    CHECK(backwardKinds(g, find(g, OpKind::SplitHeads, i)) == Kinds{OpKind::MergeHeads});
  const ir::Op& split = backwardOp(g, find(g, OpKind::MergeHeads), OpKind::SplitHeads);
  CHECK(attr<std::int64_t>(split, "heads") == 2);

  // q·kᵀ: dq = dy·k, dk = dyᵀ·q, both batched, no reduction.
  ir::OpId scores = find(g, OpKind::MatMul, 2);
  CHECK(backwardKinds(g, scores) == Kinds{OpKind::MatMul, OpKind::MatMul});
  auto ids = madeFor(g, scores, Phase::Backward);
  CHECK(attr<std::int64_t>(g.op(ids[0]), "transpose_b") == 0);
  CHECK(g.op(ids[0]).inputs[1] == g.op(scores).inputs[1]);
  CHECK(attr<std::int64_t>(g.op(ids[1]), "transpose_a") == 1);
  CHECK(g.op(ids[1]).inputs[1] == g.op(scores).inputs[0]);

  ir::OpId softmax = find(g, OpKind::Softmax);
  const ir::Op& softmaxGrad = backwardOp(g, softmax, OpKind::SoftmaxGrad);
  CHECK(softmaxGrad.inputs[0] == g.op(softmax).outputs[0]);
  CHECK(backwardKinds(g, find(g, OpKind::CausalMask)) == Kinds{OpKind::CausalMaskGrad});
  CHECK(attr<double>(backwardOp(g, find(g, OpKind::Scale), OpKind::Scale), "factor") == 0.5);

  // Dropout's gradient replays the forward mask.
  ir::OpId dropout = find(g, OpKind::Dropout);
  const ir::Op& dropoutGrad = backwardOp(g, dropout, OpKind::DropoutGrad);
  CHECK(attr<double>(dropoutGrad, "p") == 0.1);
  CHECK(attr<std::int64_t>(dropoutGrad, "seed") == 7);

  // The projection's 2-D weight gets one matmul over the flattened batch·seq rows.
  ir::OpId proj = find(g, OpKind::MatMul, 4);
  CHECK(g.op(proj).scope == "block.attn.proj");
  CHECK(backwardKinds(g, proj) ==
        Kinds{OpKind::MatMul, OpKind::Reshape, OpKind::Reshape, OpKind::MatMul});
  const ir::Op& flat = g.op(madeFor(g, proj, Phase::Backward)[1]);
  CHECK(attr<std::vector<std::int64_t>>(flat, "shape") == std::vector<std::int64_t>{-1, 8});
  CHECK(g.value(flat.outputs[0]).type.text() == "f32[batch*4, 8]");

  // Layer norm: one op for dx, dgamma, dbeta; h feeds the norm and the residual,
  // so its gradient is the residual's dy plus the norm's dx, added in the norm's scope.
  ir::OpId norm = find(g, OpKind::LayerNorm);
  CHECK(backwardKinds(g, norm) == Kinds{OpKind::LayerNormGrad, OpKind::Add});
  const ir::Op& normGrad = backwardOp(g, norm, OpKind::LayerNormGrad);
  CHECK(normGrad.outputs.size() == 3);
  CHECK(attr<double>(normGrad, "eps") == 1e-5);
  CHECK(gradientOf(t, g.op(norm).inputs[1]) == normGrad.outputs[1]);
  CHECK(gradientOf(t, g.op(norm).inputs[2]) == normGrad.outputs[2]);
  const ir::Op& sum = backwardOp(g, norm, OpKind::Add);
  CHECK(sum.inputs[1] == normGrad.outputs[0]);
  CHECK(sum.scope == "block.ln");
  // The loss averages over batch·4·8, a symbolic count: the only Scale is the scores'.
  CHECK(count(g, OpKind::Scale, Phase::Backward) == 1);
}

TEST_CASE("embedding + cross-entropy: tied table, no gradient into ids", "[autodiff]") {
  ir::Graph forward = embeddingModel();
  auto t = buildTrainingGraph(forward, OptimizerConfig::sgd(0.1, 0.9));
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;

  ir::OpId ce = find(g, OpKind::CrossEntropy);
  const ir::Op& ceGrad = backwardOp(g, ce, OpKind::CrossEntropyGrad);
  CHECK(ceGrad.inputs[0] == g.op(ce).inputs[0]);
  CHECK(ceGrad.inputs[1] == g.op(ce).inputs[1]);
  CHECK(g.op(g.value(ceGrad.inputs[2]).producer).kind == OpKind::Constant);

  ir::OpId embedding = find(g, OpKind::Embedding);
  const ir::Op& embeddingGrad = backwardOp(g, embedding, OpKind::EmbeddingGrad);
  CHECK(embeddingGrad.inputs[0] == g.op(embedding).inputs[1]);
  CHECK(attr<std::int64_t>(embeddingGrad, "vocab") == 16);
  CHECK(g.value(embeddingGrad.outputs[0]).type.text() == "f32[16, 8]");

  // The head multiplies by tableᵀ: dtable = dyᵀ·h over flattened rows, plus the
  // embedding's gradient, added in the embedding's scope.
  ir::OpId head = find(g, OpKind::MatMul, 1);
  CHECK(backwardKinds(g, head) ==
        Kinds{OpKind::MatMul, OpKind::Reshape, OpKind::Reshape, OpKind::MatMul});
  const ir::Op& dtable = g.op(madeFor(g, head, Phase::Backward)[3]);
  CHECK(attr<std::int64_t>(dtable, "transpose_a") == 1);
  CHECK(g.value(dtable.outputs[0]).type.text() == "f32[16, 8]");
  ir::ValueId table = g.op(embedding).inputs[0];
  const ir::Op& sum = g.op(g.value(gradientOf(t, table)).producer);
  CHECK(sum.kind == OpKind::Add);
  CHECK(sum.inputs == std::vector<ir::ValueId>{dtable.outputs[0], embeddingGrad.outputs[0]});
  CHECK(sum.scope == "embed");

  // Integer values (ids, labels) never get a gradient.
  for (const auto& op : g.ops())
    for (ir::ValueId v : op.outputs)
      if (op.phase != Phase::Forward) CHECK(g.value(v).type.dtype == ir::DType::F32);
}

TEST_CASE("every forward primitive has its VJP", "[autodiff]") {
  ir::Graph forward = everyOp();
  auto t = buildTrainingGraph(forward, OptimizerConfig::adam());
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;

  CHECK(backwardKinds(g, find(g, OpKind::Neg)) == Kinds{OpKind::Neg});
  CHECK(backwardKinds(g, find(g, OpKind::Exp)) == Kinds{OpKind::Mul});
  CHECK(backwardOp(g, find(g, OpKind::Exp), OpKind::Mul).inputs[1] ==
        g.op(find(g, OpKind::Exp)).outputs[0]);
  CHECK(backwardKinds(g, find(g, OpKind::Sigmoid)) == Kinds{OpKind::SigmoidGrad});
  // a - c with c[4] broadcast over rows: dc = -(dy summed to [4]).
  // Both a and c already have gradients from later ops, so each gets an Add.
  CHECK(backwardKinds(g, find(g, OpKind::Sub)) ==
        Kinds{OpKind::Add, OpKind::ReduceToShape, OpKind::Neg, OpKind::Add});
  // e / c: de = dy / c; dc = -(dy·y / c) summed to [4]; c is then used twice more.
  CHECK(backwardKinds(g, find(g, OpKind::Div)) ==
        Kinds{OpKind::Div, OpKind::Mul, OpKind::Div, OpKind::ReduceToShape, OpKind::Neg});
  // Concat → Split at the inputs' extents.
  const ir::Op& split = backwardOp(g, find(g, OpKind::Concat), OpKind::Split);
  CHECK(attr<std::vector<std::int64_t>>(split, "sizes") == std::vector<std::int64_t>{4, 4});
  CHECK(attr<std::int64_t>(split, "axis") == 1);
  const ir::Op& transpose = backwardOp(g, find(g, OpKind::Transpose), OpKind::Transpose);
  CHECK(attr<std::vector<std::int64_t>>(transpose, "perm") == std::vector<std::int64_t>{1, 0});
  const ir::Op& reshape = backwardOp(g, find(g, OpKind::Reshape), OpKind::Reshape);
  CHECK(attr<std::vector<std::int64_t>>(reshape, "shape") == std::vector<std::int64_t>{8, 2});
  CHECK(attr<std::int64_t>(backwardOp(g, find(g, OpKind::TopKGate), OpKind::TopKGateGrad), "k") ==
        2);
  const ir::Op& select = backwardOp(g, find(g, OpKind::Select), OpKind::SelectGrad);
  CHECK(attr<std::int64_t>(select, "axis") == 1);  // the last axis, written out
  CHECK(attr<std::int64_t>(select, "index") == 1);
  // Mean over a constant axis of 4: broadcast, then scale by 1/4 (then added to
  // the gradient r already has from the reshape that reads it later).
  ir::OpId mean = find(g, OpKind::Mean);
  CHECK(backwardKinds(g, mean) == Kinds{OpKind::BroadcastTo, OpKind::Scale, OpKind::Add});
  CHECK(attr<double>(backwardOp(g, mean, OpKind::Scale), "factor") == 0.25);
  const ir::Op& sum = backwardOp(g, find(g, OpKind::Sum), OpKind::BroadcastTo);
  CHECK(attr<std::vector<std::int64_t>>(sum, "axes") == std::vector<std::int64_t>{2});
  // [2, 2, 4]·w[4, 4] flattens to one 2-D matmul of concrete rows; the batched
  // [2, 2, 4]·[2, 4, 2] needs no reduction.
  ir::OpId m1 = find(g, OpKind::MatMul, 1), m2 = find(g, OpKind::MatMul, 2);
  CHECK(backwardKinds(g, m1) ==
        Kinds{OpKind::MatMul, OpKind::Reshape, OpKind::Reshape, OpKind::MatMul});
  CHECK(g.value(g.op(madeFor(g, m1, Phase::Backward)[1]).outputs[0]).type.text() == "f32[4, 4]");
  CHECK(backwardKinds(g, m2) == Kinds{OpKind::MatMul, OpKind::MatMul});
}

TEST_CASE("moe: combine gives both gradients, dispatch only the tokens'", "[autodiff]") {
  ir::Graph forward = moeModel();
  auto t = buildTrainingGraph(forward, OptimizerConfig::adam());
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;
  ir::OpId dispatch = find(g, OpKind::MoeDispatch), combine = find(g, OpKind::MoeCombine);
  const ir::Op& combineGrad = backwardOp(g, combine, OpKind::MoeCombineGrad);
  CHECK(attr<std::int64_t>(combineGrad, "capacity") == 1);
  CHECK(combineGrad.outputs.size() == 2);
  // Dispatch's backward has one output, the tokens' gradient; the gates' only
  // gradient is combine's, fed to top_k_gate_grad.
  const ir::Op& dispatchGrad = backwardOp(g, dispatch, OpKind::MoeDispatchGrad);
  CHECK(dispatchGrad.outputs.size() == 1);
  CHECK(dispatchGrad.inputs[1] == g.op(dispatch).inputs[1]);
  CHECK(attr<std::int64_t>(dispatchGrad, "capacity") == 1);
  const ir::Op& gateGrad = backwardOp(g, find(g, OpKind::TopKGate), OpKind::TopKGateGrad);
  CHECK(gateGrad.inputs[2] == combineGrad.outputs[1]);
}

TEST_CASE("building twice gives identical graphs", "[autodiff]") {
  OptimizerConfig clipped = OptimizerConfig::adamw();
  clipped.clipNorm = 1.0;
  for (const auto& optimizer : {OptimizerConfig::sgd(0.1, 0.9), OptimizerConfig::adam(), clipped})
    for (const auto& forward : {mlp(), attention(), embeddingModel(), everyOp()}) {
      auto first = buildTrainingGraph(forward, optimizer);
      auto second = buildTrainingGraph(forward, optimizer);
      CHECK(dump(first.graph) == dump(second.graph));
      CHECK(first.writeBacks == second.writeBacks);
    }
}

}  // namespace
}  // namespace meshflow::autodiff_test
