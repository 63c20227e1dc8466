// The type rule of every op: results, and the exact message of each kind of error.
#include <catch2/catch.hpp>

#include "GraphBuilder.h"
#include "ir/OpRules.h"

using meshflow::ir::Attributes;
using meshflow::ir::Dim;
using meshflow::ir::OpKind;
using meshflow::ir::ShapeError;
using meshflow::ir::TensorType;
using meshflow::test::type;
using Ints = std::vector<std::int64_t>;

namespace {

std::vector<TensorType> types(const std::vector<std::string>& texts) {
  std::vector<TensorType> out;
  for (const auto& t : texts) out.push_back(type(t));
  return out;
}

/// The inferred output types, as text joined by ", ".
std::string infer(OpKind kind, const std::vector<std::string>& inputs,
                  const Attributes& attrs = {}) {
  std::string out;
  for (const auto& t : meshflow::ir::inferTypes(kind, types(inputs), attrs))
    out += (out.empty() ? "" : ", ") + t.text();
  return out;
}

/// The ShapeError message, or "no error".
std::string error(OpKind kind, const std::vector<std::string>& inputs,
                  const Attributes& attrs = {}) {
  try {
    infer(kind, inputs, attrs);
  } catch (const ShapeError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("every op kind has a type rule", "[rules]") {
  for (int k = 0; k <= int(OpKind::AdamUpdate); ++k) {
    auto kind = static_cast<OpKind>(k);
    INFO(meshflow::ir::opName(kind));
    CHECK(std::string(meshflow::ir::opName(kind)) != "?");
    if (meshflow::ir::isDeclaredLeaf(kind)) {
      CHECK_THROWS_AS(meshflow::ir::inferTypes(kind, {}, {}), std::invalid_argument);
    } else {
      // Either it infers (a constant) or it rejects the missing inputs.
      try {
        meshflow::ir::inferTypes(kind, {}, {});
      } catch (const ShapeError&) {
      }
    }
  }
}

TEST_CASE("broadcasting follows NumPy, with batch dims matching only equal dims or 1", "[rules]") {
  CHECK(infer(OpKind::Add, {"f32[batch, 64]", "f32[64]"}) == "f32[batch, 64]");
  CHECK(infer(OpKind::Add, {"f32[batch, 1, 64]", "f32[8, 1]"}) == "f32[batch, 8, 64]");
  CHECK(infer(OpKind::Mul, {"f32[1, 4]", "f32[batch, 4]"}) == "f32[batch, 4]");
  CHECK(infer(OpKind::Sub, {"f32[]", "f32[batch, 3]"}) == "f32[batch, 3]");
  CHECK(infer(OpKind::Div, {"f32[batch*2, 3]", "f32[batch*2, 1]"}) == "f32[batch*2, 3]");
  CHECK(infer(OpKind::Add, {"bf16[batch, 8, 16]", "bf16[16]"}) == "bf16[batch, 8, 16]");
  CHECK(error(OpKind::Add, {"f32[batch, 4]", "f32[2, 4]"}) ==
        "add: shapes do not broadcast: f32[batch, 4] and f32[2, 4]");
  CHECK(error(OpKind::Add, {"f32[batch, 4]", "f32[batch*2, 4]"}) ==
        "add: shapes do not broadcast: f32[batch, 4] and f32[batch*2, 4]");
  CHECK(error(OpKind::Mul, {"f32[3]", "f32[4]"}) ==
        "mul: shapes do not broadcast: f32[3] and f32[4]");
  CHECK(error(OpKind::Add, {"f32[4]", "f16[4]"}) == "add: dtypes differ: f32[4] and f16[4]");
  CHECK(error(OpKind::Sub, {"i32[4]", "i32[4]"}) ==
        "sub: input 0 must be floating-point, got i32[4]");
  CHECK(error(OpKind::Div, {"f32[4]"}) == "div: expects 2 inputs, got 1");
  CHECK(error(OpKind::Add, {"f32[4]", "f32[4]"}, {{"axis", 1}}) == "add: unknown attribute 'axis'");
  auto b = meshflow::ir::broadcastShapes({Dim::batch(), Dim::constant(1)}, {Dim::constant(5)});
  REQUIRE(b);
  CHECK(*b == std::vector<Dim>{Dim::batch(), Dim::constant(5)});
}

TEST_CASE("unary elementwise ops keep the type", "[rules]") {
  for (OpKind k :
       {OpKind::Neg, OpKind::Relu, OpKind::Gelu, OpKind::Tanh, OpKind::Sigmoid, OpKind::Exp})
    CHECK(infer(k, {"f16[batch, 4]"}) == "f16[batch, 4]");
  CHECK(error(OpKind::Gelu, {"i32[batch, 4]"}) ==
        "gelu: expects a floating-point tensor, got i32[batch, 4]");
  CHECK(error(OpKind::Relu, {}) == "relu: expects 1 input, got 0");
  CHECK(infer(OpKind::Scale, {"f32[2]"}, {{"factor", 0.125}}) == "f32[2]");
  CHECK(infer(OpKind::Scale, {"f32[2]"}, {{"factor", 2}}) == "f32[2]");
  CHECK(error(OpKind::Scale, {"f32[2]"}) == "scale: missing attribute 'factor'");
  CHECK(error(OpKind::Scale, {"f32[2]"}, {{"factor", "x"}}) ==
        "scale: attribute 'factor' must be a number, got \"x\"");
  CHECK(infer(OpKind::Constant, {}, {{"value", 1.5}}) == "f32[]");
  CHECK(error(OpKind::Constant, {"f32[]"}, {{"value", 1.5}}) ==
        "constant: expects 0 inputs, got 1");
}

TEST_CASE("dropout and causal mask", "[rules]") {
  Attributes d{{"p", 0.1}, {"seed", 7}};
  CHECK(infer(OpKind::Dropout, {"f32[batch, 8]"}, d) == "f32[batch, 8]");
  CHECK(error(OpKind::Dropout, {"f32[8]"}, {{"p", 1.0}, {"seed", 7}}) ==
        "dropout: attribute 'p' must be in [0, 1), got 1");
  CHECK(error(OpKind::Dropout, {"f32[8]"}, {{"p", 0.5}}) == "dropout: missing attribute 'seed'");
  CHECK(error(OpKind::Dropout, {"f32[8]"}, {{"p", 0.5}, {"seed", 1.5}}) ==
        "dropout: attribute 'seed' must be an int, got 1.5");
  CHECK(infer(OpKind::DropoutGrad, {"f32[batch, 8]"},
              {{"p", 0.1}, {"seed", 7}, {"forward_op", 3}}) == "f32[batch, 8]");
  CHECK(error(OpKind::DropoutGrad, {"f32[8]"}, d) ==
        "dropout_grad: missing attribute 'forward_op'");
  CHECK(infer(OpKind::CausalMask, {"f32[batch, 8, 128, 128]"}) == "f32[batch, 8, 128, 128]");
  CHECK(infer(OpKind::CausalMaskGrad, {"f32[16, 16]"}) == "f32[16, 16]");
  CHECK(error(OpKind::CausalMask, {"f32[batch, 8, 128, 64]"}) ==
        "causal_mask: expects square trailing dimensions [..., s, s], got f32[batch, 8, 128, 64]");
  CHECK(error(OpKind::CausalMask, {"f32[4]"}) ==
        "causal_mask: expects a tensor of rank >= 2, got f32[4]");
}

TEST_CASE("gradients of unary ops take the forward value and dy", "[rules]") {
  for (OpKind k : {OpKind::ReluGrad, OpKind::GeluGrad, OpKind::TanhGrad, OpKind::SigmoidGrad,
                   OpKind::SoftmaxGrad})
    CHECK(infer(k, {"f32[batch, 4]", "f32[batch, 4]"}) == "f32[batch, 4]");
  CHECK(error(OpKind::ReluGrad, {"f32[batch, 4]", "f32[4]"}) ==
        "relu_grad: shapes differ: f32[batch, 4] and f32[4]");
  CHECK(error(OpKind::TanhGrad, {"f32[4]", "bf16[4]"}) ==
        "tanh_grad: dtypes differ: f32[4] and bf16[4]");
}

TEST_CASE("matmul", "[rules]") {
  CHECK(infer(OpKind::MatMul, {"f32[batch, 64, 128]", "f32[128, 512]"}) == "f32[batch, 64, 512]");
  CHECK(infer(OpKind::MatMul, {"f32[batch, 64, 128]", "f32[512, 128]"}, {{"transpose_b", 1}}) ==
        "f32[batch, 64, 512]");
  CHECK(infer(OpKind::MatMul, {"f32[batch, 8, 16, 32]", "f32[batch, 8, 16, 32]"},
              {{"transpose_b", 1}}) == "f32[batch, 8, 16, 16]");
  CHECK(infer(OpKind::MatMul, {"f32[batch, 8, 16, 16]", "f32[batch, 8, 16, 32]"}) ==
        "f32[batch, 8, 16, 32]");
  CHECK(infer(OpKind::MatMul, {"f32[4, 3]", "f32[3, batch]"}) == "f32[4, batch]");
  // transpose_a: a weight gradient xᵀ·dy contracts over the batch rows.
  CHECK(infer(OpKind::MatMul, {"f32[batch, 64]", "f32[batch, 32]"}, {{"transpose_a", 1}}) == "f32[64, 32]");
  CHECK(infer(OpKind::MatMul, {"f32[batch, 8, 16, 32]", "f32[batch, 8, 16, 4]"}, {{"transpose_a", 1}}) ==
        "f32[batch, 8, 32, 4]");
  CHECK(error(OpKind::MatMul, {"f32[batch, 64]", "f32[64, 32]"}, {{"transpose_a", 1}}) ==
        "matmul: inner dimensions differ: f32[batch, 64] x f32[64, 32] (transpose_a)");
  CHECK(error(OpKind::MatMul, {"f32[batch, 64, 128]", "f32[256, 512]"}) ==
        "matmul: inner dimensions differ: f32[batch, 64, 128] x f32[256, 512]");
  CHECK(error(OpKind::MatMul, {"f32[batch, 64, 128]", "f32[128, 512]"}, {{"transpose_b", 1}}) ==
        "matmul: inner dimensions differ: f32[batch, 64, 128] x f32[128, 512] (transpose_b)");
  CHECK(error(OpKind::MatMul, {"f32[2, 3, 4]", "f32[5, 4, 6]"}) ==
        "matmul: batch dimensions differ: f32[2, 3, 4] x f32[5, 4, 6]");
  CHECK(error(OpKind::MatMul, {"f32[3, 4]", "f32[2, 4, 6]"}) ==
        "matmul: batch dimensions differ: f32[3, 4] x f32[2, 4, 6]");
  CHECK(error(OpKind::MatMul, {"f32[4]", "f32[4, 4]"}) ==
        "matmul: expects operands of rank >= 2, got f32[4] x f32[4, 4]");
  CHECK(error(OpKind::MatMul, {"f32[4, 4]", "f32[4, 4]"}, {{"transpose_b", 2}}) ==
        "matmul: attribute 'transpose_b' must be 0 or 1, got 2");
  CHECK(error(OpKind::MatMul, {"f32[4, 4]", "bf16[4, 4]"}) ==
        "matmul: dtypes differ: f32[4, 4] and bf16[4, 4]");
  CHECK(error(OpKind::MatMul, {"f32[4, 4]", "i32[4, 4]"}) ==
        "matmul: input 1 must be floating-point, got i32[4, 4]");
}

TEST_CASE("softmax, layer norm and their gradients", "[rules]") {
  CHECK(infer(OpKind::Softmax, {"f32[batch, 8, 16, 16]"}) == "f32[batch, 8, 16, 16]");
  CHECK(error(OpKind::Softmax, {"f32[]"}) == "softmax: expects a tensor of rank >= 1, got f32[]");
  Attributes eps{{"eps", 1e-5}};
  CHECK(infer(OpKind::LayerNorm, {"f32[batch, 16, 64]", "f32[64]", "f32[64]"}, eps) ==
        "f32[batch, 16, 64]");
  CHECK(error(OpKind::LayerNorm, {"f32[batch, 16, 64]", "f32[32]", "f32[64]"}, eps) ==
        "layer_norm: gamma f32[32] does not match the last dimension of f32[batch, 16, 64]");
  CHECK(error(OpKind::LayerNorm, {"f32[batch, 64]", "f32[64]", "f16[64]"}, eps) ==
        "layer_norm: beta f16[64] does not match the last dimension of f32[batch, 64]");
  CHECK(error(OpKind::LayerNorm, {"f32[64]", "f32[64]", "f32[64]"}) ==
        "layer_norm: missing attribute 'eps'");
  CHECK(error(OpKind::LayerNorm, {"f32[64]", "f32[64]", "f32[64]"}, {{"eps", 0.0}}) ==
        "layer_norm: attribute 'eps' must be > 0, got 0");
  CHECK(infer(OpKind::LayerNormGrad, {"f32[batch, 64]", "f32[64]", "f32[batch, 64]"}, eps) ==
        "f32[batch, 64], f32[64], f32[64]");
  CHECK(error(OpKind::LayerNormGrad, {"f32[batch, 64]", "f32[64]", "f32[64]"}, eps) ==
        "layer_norm_grad: shapes differ: f32[batch, 64] and f32[64]");
}

TEST_CASE("embedding and cross entropy take i32 ids", "[rules]") {
  CHECK(infer(OpKind::Embedding, {"f32[50, 16]", "i32[batch, 8]"}) == "f32[batch, 8, 16]");
  CHECK(infer(OpKind::Embedding, {"f32[8, 16]", "i32[8]"}) == "f32[8, 16]");
  CHECK(error(OpKind::Embedding, {"f32[50, 16]", "f32[batch, 8]"}) ==
        "embedding: ids must be i32, got f32[batch, 8]");
  CHECK(error(OpKind::Embedding, {"f32[50]", "i32[8]"}) ==
        "embedding: table must be a floating-point matrix [V, h], got f32[50]");
  CHECK(infer(OpKind::EmbeddingGrad, {"i32[batch, 8]", "f32[batch, 8, 16]"}, {{"vocab", 50}}) ==
        "f32[50, 16]");
  CHECK(
      error(OpKind::EmbeddingGrad, {"i32[batch, 4]", "f32[batch, 8, 16]"}, {{"vocab", 50}}) ==
      "embedding_grad: ids i32[batch, 4] do not match the leading dimensions of f32[batch, 8, 16]");
  CHECK(error(OpKind::EmbeddingGrad, {"i32[8]", "f32[8, 16]"}, {{"vocab", 0}}) ==
        "embedding_grad: attribute 'vocab' must be >= 1, got 0");
  CHECK(infer(OpKind::CrossEntropy, {"f32[batch, 8, 50]", "i32[batch, 8]"}) == "f32[]");
  CHECK(error(OpKind::CrossEntropy, {"f32[batch, 8, 50]", "i32[batch, 50]"}) ==
        "cross_entropy: labels i32[batch, 50] do not match the leading dimensions of "
        "f32[batch, 8, 50]");
  CHECK(error(OpKind::CrossEntropy, {"f32[batch, 8, 50]", "i64[batch, 8]"}) ==
        "cross_entropy: labels must be i32, got i64[batch, 8]");
  CHECK(infer(OpKind::CrossEntropyGrad, {"f32[batch, 8, 50]", "i32[batch, 8]", "f32[]"}) ==
        "f32[batch, 8, 50]");
  CHECK(error(OpKind::CrossEntropyGrad, {"f32[batch, 8, 50]", "i32[batch, 8]", "f32[1]"}) ==
        "cross_entropy_grad: dloss must be a scalar, got f32[1]");
}

TEST_CASE("top-k gating", "[rules]") {
  CHECK(infer(OpKind::TopKGate, {"f32[batch, 16, 8]"}, {{"k", 2}}) == "f32[batch, 16, 8]");
  CHECK(error(OpKind::TopKGate, {"f32[batch, 16, 8]"}, {{"k", 9}}) ==
        "top_k_gate: attribute 'k' must be in [1, 8], got 9");
  CHECK(error(OpKind::TopKGate, {"f32[16, batch]"}, {{"k", 1}}) ==
        "top_k_gate: cannot gate over a batch dimension: f32[16, batch]");
  CHECK(infer(OpKind::TopKGateGrad, {"f32[4, 8]", "f32[4, 8]", "f32[4, 8]"}, {{"k", 2}}) ==
        "f32[4, 8]");
  CHECK(error(OpKind::TopKGateGrad, {"f32[4, 8]", "f32[4, 8]"}, {{"k", 2}}) ==
        "top_k_gate_grad: expects 3 inputs, got 2");
}

TEST_CASE("mixture-of-experts dispatch and combine", "[rules]") {
  // Slots are [E, B*capacity, h]: still a multiple of the batch.
  CHECK(infer(OpKind::MoeDispatch, {"f32[batch, 16, 32]", "f32[batch, 16, 4]"},
              {{"capacity", 5}}) == "f32[4, batch*5, 32]");
  CHECK(infer(OpKind::MoeCombine, {"f32[4, batch*5, 32]", "f32[batch, 16, 4]"},
              {{"capacity", 5}}) == "f32[batch, 16, 32]");
  CHECK(infer(OpKind::MoeDropped, {"f32[batch, 16, 4]"}, {{"capacity", 5}}) == "f32[]");
  CHECK(infer(OpKind::MoeDispatchGrad, {"f32[4, 10, 32]", "f32[2, 16, 4]"}, {{"capacity", 5}}) ==
        "f32[2, 16, 32]");
  CHECK(error(OpKind::MoeDispatch, {"f32[batch, 16, 32]", "f32[batch, 8, 4]"}, {{"capacity", 5}}) ==
        "moe_dispatch: needs tokens [B, S, h] and gates [B, S, E] of the same B and S, got "
        "f32[batch, 16, 32] "
        "and f32[batch, 8, 4]");
  CHECK(
      error(OpKind::MoeDispatch, {"f32[batch, 16, 32]", "f32[batch, 16, 4]"}, {{"capacity", 0}}) ==
      "moe_dispatch: attribute 'capacity' must be in [1, 2147483647], got 0");
  CHECK(
      error(OpKind::MoeCombine, {"f32[4, batch*4, 32]", "f32[batch, 16, 4]"}, {{"capacity", 5}}) ==
      "moe_combine: expert tensor f32[4, batch*4, 32] does not match gates f32[batch, 16, 4] with "
      "capacity 5 "
      "(want [4, batch*5, h])");
  CHECK(error(OpKind::MoeDropped, {"f32[16, batch]"}, {{"capacity", 1}}) ==
        "moe_dropped: needs gates [B, S, E], got f32[16, batch]");
  CHECK(infer(OpKind::MoeCombineGrad,
              {"f32[4, batch*5, 32]", "f32[batch, 16, 4]", "f32[batch, 16, 32]"},
              {{"capacity", 5}}) == "f32[4, batch*5, 32], f32[batch, 16, 4]");
  CHECK(error(OpKind::MoeCombineGrad,
              {"f32[4, batch*5, 32]", "f32[batch, 16, 4]", "f32[batch, 16, 8]"},
              {{"capacity", 5}}) ==
        "moe_combine_grad: dout f32[batch, 16, 8] must be f32[batch, 16, 32]");
}

TEST_CASE("reshape infers one -1, batch multiples included", "[rules]") {
  auto reshape = [](const std::string& x, Ints shape) {
    return infer(OpKind::Reshape, {x}, {{"shape", shape}});
  };
  auto fails = [](const std::string& x, Ints shape) {
    return error(OpKind::Reshape, {x}, {{"shape", shape}});
  };
  CHECK(reshape("f32[batch, 64, 128]", {-1, 128}) == "f32[batch*64, 128]");
  CHECK(reshape("f32[batch*64, 128]", {-1, 64, 128}) == "f32[batch, 64, 128]");
  CHECK(reshape("f32[batch, 64, 128]", {-1, 8192}) == "f32[batch, 8192]");
  CHECK(reshape("f32[4, 6]", {3, -1}) == "f32[3, 8]");
  CHECK(reshape("f32[4, 6]", {2, 12}) == "f32[2, 12]");
  CHECK(reshape("i32[batch, 8]", {-1}) == "i32[batch*8]");
  CHECK(reshape("f32[]", {1, 1}) == "f32[1, 1]");
  CHECK(fails("f32[4, 6]", {5, -1}) ==
        "reshape: cannot reshape f32[4, 6] to [5, -1]: element counts differ");
  CHECK(fails("f32[4, 6]", {4, 5}) ==
        "reshape: cannot reshape f32[4, 6] to [4, 5]: element counts differ");
  CHECK(fails("f32[batch, 64]", {64, 2}) ==
        "reshape: cannot reshape f32[batch, 64] to [64, 2]: infer the batch dimension with -1");
  CHECK(fails("f32[batch, batch]", {-1}) ==
        "reshape: cannot reshape f32[batch, batch] to [-1]: the batch appears in more than one "
        "dimension");
  CHECK(fails("f32[4, 6]", {-1, -1}) == "reshape: more than one -1 in target [-1, -1]");
  CHECK(fails("f32[4, 6]", {0, 6}) == "reshape: invalid target dimension 0 in [0, 6]");
  CHECK(error(OpKind::Reshape, {"f32[4]"}) == "reshape: missing attribute 'shape'");
  CHECK(error(OpKind::Reshape, {"f32[4]"}, {{"shape", 4}}) ==
        "reshape: attribute 'shape' must be an int list, got 4");
}

TEST_CASE("transpose, concat and split", "[rules]") {
  CHECK(infer(OpKind::Transpose, {"f32[batch, 8, 16]"}, {{"perm", Ints{0, 2, 1}}}) ==
        "f32[batch, 16, 8]");
  CHECK(error(OpKind::Transpose, {"f32[batch, 8, 16]"}, {{"perm", Ints{0, 1}}}) ==
        "transpose: perm [0, 1] is not a permutation of the dimensions of f32[batch, 8, 16]");
  CHECK(infer(OpKind::Concat, {"f32[batch, 2]", "f32[batch, 3]", "f32[batch, 1]"}, {{"axis", 1}}) ==
        "f32[batch, 6]");
  CHECK(infer(OpKind::Concat, {"f32[batch, 2]", "f32[batch*3, 2]"}, {{"axis", 0}}) ==
        "f32[batch*4, 2]");
  CHECK(error(OpKind::Concat, {"f32[batch, 2]", "f32[4, 2]"}, {{"axis", 0}}) ==
        "concat: cannot concatenate f32[batch, 2] and f32[4, 2] along axis 0");
  CHECK(error(OpKind::Concat, {"f32[batch, 2]", "f32[4, 2]"}, {{"axis", 1}}) ==
        "concat: cannot concatenate f32[batch, 2] and f32[4, 2] along axis 1");
  CHECK(error(OpKind::Concat, {"f32[2]"}, {{"axis", 1}}) ==
        "concat: axis 1 is out of range for f32[2]");
  CHECK(error(OpKind::Concat, {}, {{"axis", 0}}) == "concat: expects at least 1 input, got 0");
  Attributes thirds{{"axis", 2}, {"sizes", Ints{64, 64, 64}}};
  CHECK(infer(OpKind::Split, {"f32[batch, 16, 192]"}, thirds) ==
        "f32[batch, 16, 64], f32[batch, 16, 64], f32[batch, 16, 64]");
  CHECK(error(OpKind::Split, {"f32[batch, 16, 190]"}, thirds) ==
        "split: sizes [64, 64, 64] do not add up to dimension 2 of f32[batch, 16, 190]");
  CHECK(error(OpKind::Split, {"f32[batch, 16]"}, {{"axis", 0}, {"sizes", Ints{1}}}) ==
        "split: cannot split the batch dimension 0 of f32[batch, 16]");
  CHECK(error(OpKind::Split, {"f32[4]"}, {{"axis", 0}, {"sizes", Ints{4, 0}}}) ==
        "split: sizes must be positive, got [4, 0]");
}

TEST_CASE("reductions and their gradients", "[rules]") {
  CHECK(infer(OpKind::Sum, {"f32[batch, 8, 16]"}, {{"axes", Ints{2}}}) == "f32[batch, 8]");
  CHECK(infer(OpKind::Mean, {"f32[batch, 8, 16]"}, {{"axes", Ints{0, 1, 2}}}) == "f32[]");
  CHECK(error(OpKind::Sum, {"f32[8, 16]"}, {{"axes", Ints{2}}}) ==
        "sum: axes [2] out of range for f32[8, 16]");
  CHECK(error(OpKind::Mean, {"f32[8, 16]"}, {{"axes", Ints{1, 1}}}) ==
        "mean: axes [1, 1] repeat axis 1");
  CHECK(error(OpKind::Sum, {"f32[8, 16]"}, {{"axes", Ints{}}}) ==
        "sum: attribute 'axes' must not be empty");
  CHECK(infer(OpKind::BroadcastTo, {"f32[batch]", "f32[batch, 8, 16]"}, {{"axes", Ints{1, 2}}}) ==
        "f32[batch, 8, 16]");
  CHECK(error(OpKind::BroadcastTo, {"f32[8]", "f32[batch, 8, 16]"}, {{"axes", Ints{1}}}) ==
        "broadcast_to: f32[8] does not match f32[batch, 8, 16] without axes [1]");
  CHECK(infer(OpKind::ReduceToShape, {"f32[batch, 8, 16]", "f32[16]"}) == "f32[16]");
  CHECK(infer(OpKind::ReduceToShape, {"f32[batch, 8, 16]", "f32[1, 8, 1]"}) == "f32[1, 8, 1]");
  CHECK(error(OpKind::ReduceToShape, {"f32[batch, 8, 16]", "f32[8]"}) ==
        "reduce_to_shape: f32[8] does not broadcast to f32[batch, 8, 16]");
  CHECK(error(OpKind::ReduceToShape, {"f32[16]", "f32[batch, 16]"}) ==
        "reduce_to_shape: f32[batch, 16] does not broadcast to f32[16]");
}

TEST_CASE("attention heads", "[rules]") {
  CHECK(infer(OpKind::SplitHeads, {"f32[batch, 128, 768]"}, {{"heads", 12}}) ==
        "f32[batch, 12, 128, 64]");
  CHECK(error(OpKind::SplitHeads, {"f32[batch, 128, 768]"}, {{"heads", 5}}) ==
        "split_heads: 5 heads do not divide the last dimension of f32[batch, 128, 768]");
  CHECK(error(OpKind::SplitHeads, {"f32[128, 768]"}, {{"heads", 12}}) ==
        "split_heads: expects a tensor [b, s, heads*d], got f32[128, 768]");
  CHECK(error(OpKind::SplitHeads, {"f32[2, 128, 768]"}, {{"heads", 0}}) ==
        "split_heads: attribute 'heads' must be >= 1, got 0");
  CHECK(infer(OpKind::MergeHeads, {"f32[batch, 12, 128, 64]"}) == "f32[batch, 128, 768]");
  CHECK(error(OpKind::MergeHeads, {"f32[batch, 128, 768]"}) ==
        "merge_heads: expects a tensor [b, heads, s, d], got f32[batch, 128, 768]");
}

TEST_CASE("select and its gradient", "[rules]") {
  CHECK(infer(OpKind::Select, {"f32[batch, 16, 4]"}, {{"index", 3}}) == "f32[batch, 16]");
  CHECK(infer(OpKind::Select, {"f32[batch, 16, 4]"}, {{"axis", 1}, {"index", 0}}) ==
        "f32[batch, 4]");
  CHECK(error(OpKind::Select, {"f32[batch, 16, 4]"}, {{"index", 4}}) ==
        "select: attribute 'index' must be in [0, 3], got 4");
  CHECK(error(OpKind::Select, {"f32[batch, 16, 4]"}, {{"axis", 0}, {"index", 0}}) ==
        "select: cannot select along the batch dimension of f32[batch, 16, 4]");
  CHECK(infer(OpKind::SelectGrad, {"f32[batch, 16]", "f32[batch, 16, 4]"},
              {{"axis", 2}, {"index", 1}}) == "f32[batch, 16, 4]");
  CHECK(error(OpKind::SelectGrad, {"f32[batch, 4]", "f32[batch, 16, 4]"},
              {{"axis", 2}, {"index", 1}}) ==
        "select_grad: dy f32[batch, 4] does not match f32[batch, 16, 4] without axis 2");
  CHECK(error(OpKind::SelectGrad, {"f32[batch, 16]", "f32[batch, 16, 4]"}, {{"index", 1}}) ==
        "select_grad: missing attribute 'axis'");
}

TEST_CASE("optimizer updates", "[rules]") {
  CHECK(infer(OpKind::GlobalNorm, {"f32[64, 64]", "f32[64]"}) == "f32[]");
  CHECK(error(OpKind::GlobalNorm, {}) == "global_norm: expects at least 1 input, got 0");
  CHECK(infer(OpKind::ClipScale, {"f32[]"}, {{"clip_norm", 1.0}}) == "f32[]");
  CHECK(error(OpKind::ClipScale, {"f32[]"}, {{"clip_norm", 0.0}}) ==
        "clip_scale: attribute 'clip_norm' must be > 0, got 0");
  CHECK(error(OpKind::ClipScale, {"f32[2]"}, {{"clip_norm", 1.0}}) ==
        "clip_scale: norm must be a scalar, got f32[2]");
  Attributes sgd{{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.0}};
  CHECK(infer(OpKind::SgdUpdate, {"f32[64, 8]", "f32[64, 8]", "f32[]", "f32[64, 8]"}, sgd) ==
        "f32[64, 8], f32[64, 8]");
  CHECK(error(OpKind::SgdUpdate, {"f32[64, 8]", "f32[64, 4]", "f32[]", "f32[64, 8]"}, sgd) ==
        "sgd_update: shapes differ: f32[64, 8] and f32[64, 4]");
  CHECK(error(OpKind::SgdUpdate, {"f32[8]", "f32[8]", "f32[8]", "f32[8]"}, sgd) ==
        "sgd_update: scale must be a scalar, got f32[8]");
  CHECK(error(OpKind::SgdUpdate, {"f32[8]", "f32[8]", "f32[]", "f32[8]"},
              {{"lr", 0.1}, {"momentum", 1.0}, {"weight_decay", 0.0}}) ==
        "sgd_update: attribute 'momentum' must be in [0, 1), got 1");
  Attributes adam{{"lr", 1e-3},           {"beta1", 0.9},   {"beta2", 0.999}, {"eps", 1e-8},
                  {"weight_decay", 0.01}, {"decoupled", 1}, {"step", 1}};
  CHECK(infer(OpKind::AdamUpdate, {"bf16[8]", "bf16[8]", "f32[]", "f32[8]", "f32[8]"}, adam) ==
        "bf16[8], f32[8], f32[8]");
  CHECK(error(OpKind::AdamUpdate, {"f32[8]", "f32[8]", "f32[]", "f32[8]"}, adam) ==
        "adam_update: expects 5 inputs, got 4");
  Attributes noStep = adam;
  noStep.erase("step");
  CHECK(error(OpKind::AdamUpdate, {"f32[8]", "f32[8]", "f32[]", "f32[8]", "f32[8]"}, noStep) ==
        "adam_update: missing attribute 'step'");
  Attributes badFlag = adam;
  badFlag["decoupled"] = std::int64_t{2};
  CHECK(error(OpKind::AdamUpdate, {"f32[8]", "f32[8]", "f32[]", "f32[8]", "f32[8]"}, badFlag) ==
        "adam_update: attribute 'decoupled' must be in [0, 1], got 2");
  CHECK(error(OpKind::AdamUpdate, {"f32[8]", "f32[8]", "f32[]", "f32[8]", "f32[7]"}, adam) ==
        "adam_update: shapes differ: f32[8] and f32[7]");
}

TEST_CASE("declared leaves", "[rules]") {
  using meshflow::ir::checkLeafType;
  auto leafError = [](OpKind kind, const std::string& t, const Attributes& attrs) -> std::string {
    try {
      checkLeafType(kind, type(t), attrs);
    } catch (const ShapeError& e) {
      return e.what();
    }
    return "no error";
  };
  CHECK(leafError(OpKind::Input, "i32[batch, 16]", {{"name", "ids"}}) == "no error");
  CHECK(leafError(OpKind::Input, "i32[batch, 16]", {}) == "input: missing attribute 'name'");
  CHECK(leafError(OpKind::Input, "f32[0]", {{"name", "x"}}) ==
        "input: dimensions must be positive, got f32[0]");
  Attributes normal{{"name", "w"}, {"init", "normal"}, {"std", 0.02}};
  CHECK(leafError(OpKind::Parameter, "f32[4, 4]", normal) == "no error");
  CHECK(leafError(OpKind::Parameter, "f32[4, 4]", {{"name", "w"}, {"init", "zeros"}}) ==
        "no error");
  CHECK(leafError(OpKind::Parameter, "f32[batch, 4]", normal) ==
        "parameter: a parameter cannot depend on the batch size: f32[batch, 4]");
  CHECK(leafError(OpKind::Parameter, "i32[4]", normal) ==
        "parameter: expects a floating-point type, got i32[4]");
  CHECK(leafError(OpKind::Parameter, "f32[4]", {{"name", "w"}, {"init", "normal"}}) ==
        "parameter: missing attribute 'std'");
  CHECK(leafError(OpKind::Parameter, "f32[4]", {{"name", "w"}, {"init", "uniform"}}) ==
        "parameter: attribute 'init' must be \"normal\", \"zeros\", \"ones\" or \"full\", got \"uniform\"");
  CHECK(leafError(OpKind::Parameter, "f32[4]", {{"name", "w"}, {"init", "ones"}, {"std", 1.0}}) ==
        "no error");
  CHECK(leafError(OpKind::Parameter, "f32[4]", {{"name", "w"}, {"init", "normal"}, {"std", -1.0}}) ==
        "parameter: attribute 'std' must be >= 0");
  CHECK_THROWS_AS(checkLeafType(OpKind::MatMul, type("f32[4]"), {}), std::invalid_argument);
}
