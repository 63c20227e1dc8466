// Test helpers: building graphs op by op with their types inferred, and the
// graph of a Megatron-style GPT (the real one will come from stdlib/models.mesh).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "ir/GraphText.h"
#include "ir/OpRules.h"

namespace meshflow::test {

/// The type written `text` in the graph text form, e.g. "f32[batch, 64]".
inline ir::TensorType type(const std::string& text) {
  ir::Graph g = ir::parseGraph("graph outputs()\n%0 = input() : " + text + " @fwd\n");
  return g.value(0).type;
}

/// Appends ops to a graph, inferring output types with ir::inferTypes.
class GraphBuilder {
 public:
  ir::Graph graph;
  std::string scope;  // given to every op added

  ir::ValueId input(const std::string& name, const std::string& typeText) {
    return leaf(ir::OpKind::Input, name, type(typeText), {{"name", name}});
  }

  ir::ValueId parameter(const std::string& name, const std::string& typeText,
                        const std::string& init = "normal") {
    ir::Attributes attrs{{"name", name}, {"init", init}};
    if (init == "normal") attrs["std"] = 0.02;
    return leaf(ir::OpKind::Parameter, name, type(typeText), attrs);
  }

  std::vector<ir::ValueId> ops(ir::OpKind kind, const std::vector<ir::ValueId>& inputs,
                               const ir::Attributes& attrs = {}) {
    std::vector<ir::TensorType> types;
    for (ir::ValueId v : inputs) types.push_back(graph.value(v).type);
    ir::Op op;
    op.kind = kind;
    op.inputs = inputs;
    op.attrs = attrs;
    op.scope = scope;
    ir::OpId id = graph.addOp(op, ir::inferTypes(kind, types, attrs));
    return graph.op(id).outputs;
  }

  ir::ValueId op(ir::OpKind kind, const std::vector<ir::ValueId>& inputs,
                 const ir::Attributes& attrs = {}) {
    return ops(kind, inputs, attrs).at(0);
  }

  /// layer_norm over `hidden` with `<scope>.<name>.gamma/beta` parameters.
  ir::ValueId layerNorm(const std::string& name, ir::ValueId in, std::int64_t hidden) {
    std::string type = "f32[" + std::to_string(hidden) + "]";
    auto gamma = parameter(scope + "." + name + ".gamma", type, "ones");
    auto beta = parameter(scope + "." + name + ".beta", type, "zeros");
    return op(ir::OpKind::LayerNorm, {in, gamma, beta}, {{"eps", 1e-5}});
  }

  /// A pre-norm transformer block (scopes `<block>.attn`, `<block>.mlp`) on
  /// x[batch, seq, hidden], the way Megatron's GPT builds it.
  ir::ValueId transformerBlock(const std::string& block, ir::ValueId x, std::int64_t hidden,
                               std::int64_t heads) {
    using ir::OpKind;
    scope = block + ".attn";
    auto qkv = linear("qkv", layerNorm("ln1", x, hidden), hidden, 3 * hidden);
    auto parts = ops(OpKind::Split, {qkv},
                     {{"axis", std::int64_t{2}},
                      {"sizes", std::vector<std::int64_t>{hidden, hidden, hidden}}});
    ir::Attributes headsAttr{{"heads", heads}};
    auto q = op(OpKind::SplitHeads, {parts[0]}, headsAttr);
    auto k = op(OpKind::SplitHeads, {parts[1]}, headsAttr);
    auto v = op(OpKind::SplitHeads, {parts[2]}, headsAttr);
    auto scores = op(OpKind::MatMul, {q, k}, {{"transpose_b", std::int64_t{1}}});
    scores = op(OpKind::Scale, {scores}, {{"factor", 1.0 / std::sqrt(double(hidden / heads))}});
    auto probs = op(OpKind::Softmax, {op(OpKind::CausalMask, {scores})});
    auto context = op(OpKind::MergeHeads, {op(OpKind::MatMul, {probs, v})});
    x = op(OpKind::Add, {x, linear("proj", context, hidden, hidden)});
    scope = block + ".mlp";
    auto inner = op(OpKind::Gelu, {linear("fc1", layerNorm("ln2", x, hidden), hidden, 4 * hidden)});
    return op(OpKind::Add, {x, linear("fc2", inner, 4 * hidden, hidden)});
  }

  /// `in @ w + b` with `<scope>.<name>.w` [from, to] and `<scope>.<name>.b` [to].
  ir::ValueId linear(const std::string& name, ir::ValueId in, std::int64_t from, std::int64_t to) {
    auto w = parameter(scope + "." + name + ".w",
                       "f32[" + std::to_string(from) + ", " + std::to_string(to) + "]");
    auto bias = parameter(scope + "." + name + ".b", "f32[" + std::to_string(to) + "]", "zeros");
    return op(ir::OpKind::Add, {op(ir::OpKind::MatMul, {in, w}), bias});
  }

 private:
  ir::ValueId leaf(ir::OpKind kind, const std::string& name, const ir::TensorType& t,
                   const ir::Attributes& attrs) {
    ir::Op op;
    op.kind = kind;
    op.attrs = attrs;
    op.scope = scope;
    ir::OpId id = graph.addOp(op, {t});
    ir::ValueId out = graph.op(id).outputs.at(0);
    graph.value(out).name = name;
    return out;
  }
};

struct GptConfig {
  std::int64_t layers;
  std::int64_t hidden;
  std::int64_t heads;
  std::int64_t seq;
  std::int64_t vocab;
};

/// The parameters of the GPT buildGpt makes: 12·l·h² + 13·l·h per block,
/// (V + s)·h of embeddings, 2·h of final layer norm.
inline std::int64_t gptParameterCount(const GptConfig& c) {
  std::int64_t l = c.layers, h = c.hidden;
  return 12 * l * h * h + 13 * l * h + (c.vocab + c.seq) * h + 2 * h;
}

/// Forward + backward FLOPs of one step with global batch `batch`
/// (Narayanan et al. 2021): 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)).
inline double megatronFlops(const GptConfig& c, std::int64_t batch) {
  double B = double(batch), s = double(c.seq), l = double(c.layers), h = double(c.hidden);
  double V = double(c.vocab);
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

/// A GPT built the way Megatron builds it: token + position embeddings, pre-norm
/// blocks (attention with a fused QKV linear, causal softmax, output linear,
/// residual; MLP 4h with gelu, residual), a final layer norm, logits against the
/// tied embedding table, and the cross-entropy loss as the graph's output.
inline ir::Graph buildGpt(const GptConfig& c) {
  using ir::OpKind;
  GraphBuilder b;
  auto dims = [](std::int64_t x) { return std::to_string(x); };
  std::string h = dims(c.hidden), s = dims(c.seq);
  auto ids = b.input("ids", "i32[batch, " + s + "]");
  auto labels = b.input("labels", "i32[batch, " + s + "]");
  auto positions = b.input("positions", "i32[" + s + "]");
  b.scope = "embed";
  auto wte = b.parameter("wte", "f32[" + dims(c.vocab) + ", " + h + "]");
  auto wpe = b.parameter("wpe", "f32[" + s + ", " + h + "]");
  auto x = b.op(OpKind::Add,
                {b.op(OpKind::Embedding, {wte, ids}), b.op(OpKind::Embedding, {wpe, positions})});
  for (std::int64_t layer = 0; layer < c.layers; ++layer)
    x = b.transformerBlock("block" + std::to_string(layer), x, c.hidden, c.heads);
  b.scope = "head";
  auto logits =
      b.op(OpKind::MatMul, {b.layerNorm("ln_f", x, c.hidden), wte}, {{"transpose_b", std::int64_t{1}}});
  b.graph.outputs = {b.op(OpKind::CrossEntropy, {logits, labels})};
  return std::move(b.graph);
}

}  // namespace meshflow::test
