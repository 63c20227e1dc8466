// Small forward graphs built by hand for the autodiff tests, with their types
// written out, so the tests do not depend on tracing or the shape rules.
#pragma once

#include <string>
#include <vector>

#include "ir/Graph.h"

namespace meshflow::autodiff_test {

using ir::Dim;
using ir::OpKind;
using ir::TensorType;
using ir::ValueId;

inline const Dim kBatch = Dim::batch();
inline Dim d(std::int64_t n) { return Dim::constant(n); }
inline TensorType f32(std::vector<Dim> shape) { return {ir::DType::F32, std::move(shape)}; }
inline TensorType i32(std::vector<Dim> shape) { return {ir::DType::I32, std::move(shape)}; }

/// Records ops the way tracing does: under the current scope, types given.
struct GraphBuilder {
  ir::Graph graph;
  std::string scope;

  std::vector<ValueId> ops(OpKind kind, std::vector<ValueId> inputs,
                           const std::vector<TensorType>& types, ir::Attributes attrs = {}) {
    ir::Op op;
    op.kind = kind;
    op.inputs = std::move(inputs);
    op.attrs = std::move(attrs);
    op.scope = scope;
    op.location = {"model.mesh", static_cast<std::uint32_t>(graph.ops().size() + 1), 1};
    return graph.op(graph.addOp(std::move(op), types)).outputs;
  }
  ValueId op(OpKind kind, std::vector<ValueId> inputs, const TensorType& type,
             ir::Attributes attrs = {}) {
    return ops(kind, std::move(inputs), {type}, std::move(attrs)).front();
  }
  ValueId leaf(OpKind kind, const std::string& name, const TensorType& type) {
    std::string full = scope.empty() ? name : scope + "." + name;
    ir::Attributes attrs = {{"name", full}};
    if (kind == OpKind::Parameter) {
      attrs["init"] = std::string("normal");
      attrs["std"] = 0.02;
    }
    ValueId v = op(kind, {}, type, attrs);
    graph.value(v).name = full;
    return v;
  }
  ValueId input(const std::string& name, const TensorType& type) {
    return leaf(OpKind::Input, name, type);
  }
  ValueId param(const std::string& name, const TensorType& type) {
    return leaf(OpKind::Parameter, name, type);
  }
  /// y = x·w + b under scope `name`.
  ValueId linear(const std::string& name, ValueId x, std::int64_t in, std::int64_t out) {
    std::string outer = scope;
    scope = outer.empty() ? name : outer + "." + name;
    std::vector<Dim> shape = graph.value(x).type.shape;
    shape.back() = d(out);
    ValueId w = param("w", f32({d(in), d(out)}));
    ValueId b = param("b", f32({d(out)}));
    ValueId y = op(OpKind::Add, {op(OpKind::MatMul, {x, w}, f32(shape)), b}, f32(shape));
    scope = outer;
    return y;
  }
  void finish(ValueId loss) { graph.outputs = {loss}; }
};

/// x[batch, 4] → linear(8) → relu → linear(2); loss = mean((out - y)²).
/// The mean runs over the batch, so its count is symbolic.
inline ir::Graph mlp() {
  GraphBuilder g;
  ValueId x = g.input("x", f32({kBatch, d(4)}));
  ValueId y = g.input("y", f32({kBatch, d(2)}));
  ValueId h = g.linear("fc1", x, 4, 8);
  h = g.op(OpKind::Relu, {h}, f32({kBatch, d(8)}));
  ValueId out = g.linear("fc2", h, 8, 2);
  ValueId diff = g.op(OpKind::Sub, {out, y}, f32({kBatch, d(2)}));
  ValueId sq = g.op(OpKind::Mul, {diff, diff}, f32({kBatch, d(2)}));
  g.finish(g.op(OpKind::Mean, {sq}, f32({}), {{"axes", std::vector<std::int64_t>{0, 1}}}));
  return std::move(g.graph);
}

/// One pre-norm causal self-attention block with two heads on x[batch, 4, 8]:
/// h = x·w_in; h + proj(attention(layer_norm(h))); loss = mean(tanh(·)).
/// h feeds both the norm and the residual, so its gradient is a sum.
inline ir::Graph attention() {
  GraphBuilder g;
  TensorType act = f32({kBatch, d(4), d(8)});
  TensorType heads = f32({kBatch, d(2), d(4), d(4)});
  TensorType scores = f32({kBatch, d(2), d(4), d(4)});
  ValueId x = g.input("x", act);
  g.scope = "block";
  ValueId h = g.op(OpKind::MatMul, {x, g.param("w_in", f32({d(8), d(8)}))}, act);
  g.scope = "block.ln";
  ValueId gamma = g.param("gamma", f32({d(8)}));
  ValueId beta = g.param("beta", f32({d(8)}));
  ValueId n = g.op(OpKind::LayerNorm, {h, gamma, beta}, act, {{"eps", 1e-5}});
  g.scope = "block.attn";
  ValueId qkv =
      g.op(OpKind::MatMul, {n, g.param("w_qkv", f32({d(8), d(24)}))}, f32({kBatch, d(4), d(24)}));
  auto parts = g.ops(OpKind::Split, {qkv}, {act, act, act},
                     {{"axis", std::int64_t{2}}, {"sizes", std::vector<std::int64_t>{8, 8, 8}}});
  std::vector<ValueId> qkvHeads;
  for (ValueId p : parts)
    qkvHeads.push_back(g.op(OpKind::SplitHeads, {p}, heads, {{"heads", std::int64_t{2}}}));
  ValueId s =
      g.op(OpKind::MatMul, {qkvHeads[0], qkvHeads[1]}, scores, {{"transpose_b", std::int64_t{1}}});
  s = g.op(OpKind::Scale, {s}, scores, {{"factor", 0.5}});
  s = g.op(OpKind::CausalMask, {s}, scores);
  s = g.op(OpKind::Softmax, {s}, scores);
  ValueId o = g.op(OpKind::MatMul, {s, qkvHeads[2]}, heads);
  o = g.op(OpKind::MergeHeads, {o}, act);
  g.scope = "block.attn.proj";
  o = g.op(OpKind::MatMul, {o, g.param("w", f32({d(8), d(8)}))}, act);
  o = g.op(OpKind::Dropout, {o}, act, {{"p", 0.1}, {"seed", std::int64_t{7}}});
  g.scope = "block";
  ValueId r = g.op(OpKind::Add, {h, o}, act);
  g.scope = "";
  ValueId t = g.op(OpKind::Tanh, {r}, act);
  g.finish(g.op(OpKind::Mean, {t}, f32({}), {{"axes", std::vector<std::int64_t>{0, 1, 2}}}));
  return std::move(g.graph);
}

/// ids[batch, 4] → embedding(16, 8) → gelu(linear) → logits with the tied
/// table (matmul transpose_b) → cross-entropy against labels. The table is
/// used twice, so its gradient is a sum of EmbeddingGrad and a MatMul.
inline ir::Graph embeddingModel() {
  GraphBuilder g;
  ValueId ids = g.input("ids", i32({kBatch, d(4)}));
  ValueId labels = g.input("labels", i32({kBatch, d(4)}));
  g.scope = "embed";
  ValueId table = g.param("table", f32({d(16), d(8)}));
  ValueId e = g.op(OpKind::Embedding, {table, ids}, f32({kBatch, d(4), d(8)}));
  g.scope = "";
  ValueId h = g.linear("hidden", e, 8, 8);
  h = g.op(OpKind::Gelu, {h}, f32({kBatch, d(4), d(8)}));
  g.scope = "head";
  ValueId logits = g.op(OpKind::MatMul, {h, table}, f32({kBatch, d(4), d(16)}),
                        {{"transpose_b", std::int64_t{1}}});
  g.finish(g.op(OpKind::CrossEntropy, {logits, labels}, f32({})));
  return std::move(g.graph);
}

/// Every forward primitive not used by the models above, on concrete shapes:
/// neg, sigmoid, exp, div, sub with broadcasting, concat, transpose, reshape,
/// select, top-k gate, sum and mean over constant axes, and batched matmuls.
inline ir::Graph everyOp() {
  GraphBuilder g;
  ValueId x = g.input("x", f32({d(2), d(3)}));
  ValueId w = g.param("w", f32({d(3), d(4)}));
  ValueId c = g.param("c", f32({d(4)}));
  ValueId a = g.op(OpKind::MatMul, {x, w}, f32({d(2), d(4)}));
  ValueId s =
      g.op(OpKind::Sigmoid, {g.op(OpKind::Sub, {a, c}, f32({d(2), d(4)}))}, f32({d(2), d(4)}));
  ValueId e = g.op(OpKind::Exp, {g.op(OpKind::Neg, {s}, f32({d(2), d(4)}))}, f32({d(2), d(4)}));
  ValueId q = g.op(OpKind::Div, {e, c}, f32({d(2), d(4)}));
  ValueId cat = g.op(OpKind::Concat, {q, a}, f32({d(2), d(8)}), {{"axis", std::int64_t{1}}});
  ValueId t = g.op(OpKind::Transpose, {cat}, f32({d(8), d(2)}),
                   {{"perm", std::vector<std::int64_t>{1, 0}}});
  ValueId r =
      g.op(OpKind::Reshape, {t}, f32({d(4), d(4)}), {{"shape", std::vector<std::int64_t>{4, -1}}});
  ValueId gate = g.op(OpKind::TopKGate, {r}, f32({d(4), d(4)}), {{"k", std::int64_t{2}}});
  ValueId sel = g.op(OpKind::Select, {gate}, f32({d(4)}), {{"index", std::int64_t{1}}});
  ValueId m = g.op(OpKind::Mean, {r}, f32({d(4)}), {{"axes", std::vector<std::int64_t>{1}}});
  // Batched matmuls: [2, 2, 4]·w[4, 4] (a 2-D weight) and [2, 2, 4]·[2, 4, 2].
  ValueId v = g.param("v", f32({d(4), d(4)}));
  ValueId r3 = g.op(OpKind::Reshape, {r}, f32({d(2), d(2), d(4)}),
                    {{"shape", std::vector<std::int64_t>{2, 2, 4}}});
  ValueId v3 = g.op(OpKind::Reshape, {v}, f32({d(2), d(4), d(2)}),
                    {{"shape", std::vector<std::int64_t>{2, 4, 2}}});
  ValueId m1 = g.op(OpKind::MatMul, {r3, v}, f32({d(2), d(2), d(4)}));
  ValueId m2 = g.op(OpKind::MatMul, {m1, v3}, f32({d(2), d(2), d(2)}));
  ValueId bs = g.op(OpKind::Sum, {m2}, f32({d(2), d(2)}), {{"axes", std::vector<std::int64_t>{2}}});
  bs = g.op(OpKind::Reshape, {bs}, f32({d(4)}), {{"shape", std::vector<std::int64_t>{-1}}});
  ValueId total = g.op(OpKind::Add, {g.op(OpKind::Add, {sel, m}, f32({d(4)})), bs}, f32({d(4)}));
  g.finish(g.op(OpKind::Sum, {total}, f32({}), {{"axes", std::vector<std::int64_t>{0}}}));
  return std::move(g.graph);
}

/// A mixture of experts on x = input[batch, 4, 3]·wx: gate logits x·g, top-2 gates over 4
/// experts, dispatch with capacity 1 (so choices drop), batched experts
/// w1[4, 3, 5] → gelu → w2[4, 5, 3], combine; loss = Σ out².
inline ir::Graph moeModel() {
  GraphBuilder g;
  ValueId x = g.op(OpKind::MatMul,
                   {g.input("x", f32({kBatch, d(4), d(3)})), g.param("wx", f32({d(3), d(3)}))},
                   f32({kBatch, d(4), d(3)}));
  ValueId gw = g.param("gate", f32({d(3), d(4)}));
  ValueId w1 = g.param("w1", f32({d(4), d(3), d(5)}));
  ValueId w2 = g.param("w2", f32({d(4), d(5), d(3)}));
  ir::Attributes capacity = {{"capacity", std::int64_t{1}}};
  ValueId logits = g.op(OpKind::MatMul, {x, gw}, f32({kBatch, d(4), d(4)}));
  ValueId gates =
      g.op(OpKind::TopKGate, {logits}, f32({kBatch, d(4), d(4)}), {{"k", std::int64_t{2}}});
  ValueId slots = g.op(OpKind::MoeDispatch, {x, gates}, f32({d(4), kBatch, d(3)}), capacity);
  ValueId h = g.op(OpKind::Gelu, {g.op(OpKind::MatMul, {slots, w1}, f32({d(4), kBatch, d(5)}))},
                   f32({d(4), kBatch, d(5)}));
  ValueId y = g.op(OpKind::MatMul, {h, w2}, f32({d(4), kBatch, d(3)}));
  ValueId out = g.op(OpKind::MoeCombine, {y, gates}, f32({kBatch, d(4), d(3)}), capacity);
  ValueId sq = g.op(OpKind::Mul, {out, out}, f32({kBatch, d(4), d(3)}));
  g.finish(g.op(OpKind::Sum, {sq}, f32({}), {{"axes", std::vector<std::int64_t>{0, 1, 2}}}));
  return std::move(g.graph);
}

}  // namespace meshflow::autodiff_test
