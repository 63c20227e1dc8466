// Known values for every forward op, and the errors kernels give for operands
// that break an op's contract.
#include <cmath>

#include "KernelTestSupport.h"

using namespace kernel_test;
using meshflow::runtime::cpu::KernelError;

namespace {

Tensor iota(Shape shape, float start = 0.0f) {
  Tensor t = Tensor::zeros(std::move(shape));
  for (std::size_t i = 0; i < t.f32().size(); ++i) t.f32()[i] = start + static_cast<float>(i);
  return t;
}

}  // namespace

TEST_CASE("constant makes an f32 scalar", "[kernels][forward]") {
  Tensor c = run1(OpKind::Constant, {}, {{"value", 2.5}});
  CHECK(c.shape().empty());
  CHECK(c.item() == 2.5f);
}

TEST_CASE("matmul multiplies, folds batch dims, batches and transposes", "[kernels][forward]") {
  Tensor a = Tensor::fromF32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = Tensor::fromF32({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor y = run1(OpKind::MatMul, {a, b});
  CHECK(y.shape() == Shape{2, 2});
  checkValues(y, {58, 64, 139, 154});

  // b given as [n, k] with transpose_b.
  Tensor bt = run1(OpKind::Transpose, {b}, {{"perm", std::vector<std::int64_t>{1, 0}}});
  checkValues(run1(OpKind::MatMul, {a, bt}, {{"transpose_b", std::int64_t{1}}}),
              {58, 64, 139, 154});

  // a given as [k, m] with transpose_a, also batched and against a shared b.
  Tensor at = run1(OpKind::Transpose, {a}, {{"perm", std::vector<std::int64_t>{1, 0}}});
  checkValues(run1(OpKind::MatMul, {at, b}, {{"transpose_a", std::int64_t{1}}}), {58, 64, 139, 154});
  checkValues(run1(OpKind::MatMul, {at, bt}, {{"transpose_a", std::int64_t{1}}, {"transpose_b", std::int64_t{1}}}),
              {58, 64, 139, 154});
  Tensor at2 = run1(OpKind::Concat, {at, at}, {{"axis", std::int64_t{0}}});
  at2 = run1(OpKind::Reshape, {at2}, {{"shape", std::vector<std::int64_t>{2, 3, 2}}});
  Tensor b2 = run1(OpKind::Concat, {b, b}, {{"axis", std::int64_t{0}}});
  b2 = run1(OpKind::Reshape, {b2}, {{"shape", std::vector<std::int64_t>{2, 3, 2}}});
  checkValues(run1(OpKind::MatMul, {at2, b}, {{"transpose_a", std::int64_t{1}}}),
              {58, 64, 139, 154, 58, 64, 139, 154});
  checkValues(run1(OpKind::MatMul, {at2, b2}, {{"transpose_a", std::int64_t{1}}}),
              {58, 64, 139, 154, 58, 64, 139, 154});
  CHECK_THROWS_AS(run1(OpKind::MatMul, {a, b}, {{"transpose_a", std::int64_t{1}}}), KernelError);

  // a[2, 2, 3] x b[3, 2]: leading dims fold into rows.
  Tensor a3 = run1(OpKind::Concat, {a, a}, {{"axis", std::int64_t{0}}});
  a3 = run1(OpKind::Reshape, {a3}, {{"shape", std::vector<std::int64_t>{2, 2, 3}}});
  Tensor y3 = run1(OpKind::MatMul, {a3, b});
  CHECK(y3.shape() == Shape{2, 2, 2});
  checkValues(y3, {58, 64, 139, 154, 58, 64, 139, 154});

  // a[2, 2, 3] x b[2, 3, 2]: one product per batch entry.
  Tensor b3 = Tensor::fromF32({2, 3, 2}, {7, 8, 9, 10, 11, 12, 1, 0, 0, 1, 0, 0});
  checkValues(run1(OpKind::MatMul, {a3, b3}), {58, 64, 139, 154, 1, 2, 4, 5});
}

TEST_CASE("matmul refuses mismatched operands", "[kernels][forward][errors]") {
  Tensor a = Tensor::zeros({2, 3});
  Tensor b = Tensor::zeros({4, 2});
  CHECK_THROWS_WITH(run1(OpKind::MatMul, {a, b}),
                    "matmul: contracting dimensions differ: f32[2, 3] x f32[4, 2]");
  CHECK_THROWS_AS(run1(OpKind::MatMul, {Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 2})}),
                  KernelError);
  CHECK_THROWS_WITH(run1(OpKind::MatMul, {a}),
                    "matmul: expects 2 inputs and 1 outputs, got 1 and 1");
}

TEST_CASE("binary ops broadcast over trailing dimensions", "[kernels][forward]") {
  Tensor a = iota({2, 3});
  Tensor row = Tensor::fromF32({3}, {10, 20, 30});
  Tensor col = Tensor::fromF32({2, 1}, {1, 2});
  checkValues(run1(OpKind::Add, {a, row}), {10, 21, 32, 13, 24, 35});
  checkValues(run1(OpKind::Sub, {a, col}), {-1, 0, 1, 1, 2, 3});
  checkValues(run1(OpKind::Mul, {col, row}), {10, 20, 30, 20, 40, 60});
  checkValues(run1(OpKind::Div, {a, Tensor::scalar(2)}), {0, 0.5, 1, 1.5, 2, 2.5});
  CHECK(run1(OpKind::Mul, {col, row}).shape() == Shape{2, 3});
  CHECK_THROWS_WITH(run1(OpKind::Add, {a, Tensor::zeros({2})}),
                    "add: cannot broadcast f32[2, 3] with f32[2]");
}

TEST_CASE("unary ops", "[kernels][forward]") {
  Tensor x = Tensor::fromF32({4}, {-1, 0, 0.5, 1});
  checkValues(run1(OpKind::Neg, {x}), {1, 0, -0.5, -1});
  checkValues(run1(OpKind::Relu, {x}), {0, 0, 0.5, 1});
  // GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  checkValues(run1(OpKind::Gelu, {x}), {-0.158808f, 0, 0.345714f, 0.841192f});
  checkValues(run1(OpKind::Tanh, {x}), {-0.761594f, 0, 0.462117f, 0.761594f});
  checkValues(run1(OpKind::Sigmoid, {x}), {0.268941f, 0.5f, 0.622459f, 0.731059f});
  checkValues(run1(OpKind::Exp, {x}), {0.367879f, 1, 1.648721f, 2.718282f});
  checkValues(run1(OpKind::Rsqrt, {run1(OpKind::Exp, {x})}, {{"eps", 0.0}}),
              {1.648721f, 1, 0.778801f, 0.606531f});
  checkValues(run1(OpKind::Scale, {x}, {{"factor", -2.0}}), {2, 0, -1, -2});
  // Sigmoid does not overflow at the extremes.
  checkValues(run1(OpKind::Sigmoid, {Tensor::fromF32({2}, {-200, 200})}), {0, 1});
}

TEST_CASE("softmax over the last dimension is stable", "[kernels][forward]") {
  Tensor x = Tensor::fromF32({2, 3}, {1, 2, 3, 1001, 1002, 1003});
  checkValues(run1(OpKind::Softmax, {x}),
              {0.0900306f, 0.244728f, 0.665241f, 0.0900306f, 0.244728f, 0.665241f});
}

TEST_CASE("softmax gives exact zeros for masked scores, never subnormals", "[kernels][forward]") {
  // A causal mask writes -1e9; the masked probabilities must be 0, not tiny
  // subnormal floats that make the next GEMM ~50x slower.
  std::vector<float> row(64, 0.5f);
  for (std::size_t i = 32; i < row.size(); ++i) row[i] = -1e9f;
  Tensor y = run1(OpKind::Softmax, {Tensor::fromF32({1, 64}, row)});
  for (std::size_t i = 0; i < row.size(); ++i) {
    INFO("element " << i << " = " << y.f32()[i]);
    if (i < 32) CHECK(y.f32()[i] == Approx(1.0 / 32));
    else CHECK(y.f32()[i] == 0.0f);
  }
}

TEST_CASE("layer_norm uses the biased variance and eps", "[kernels][forward]") {
  Tensor x = Tensor::fromF32({2, 4}, {1, 2, 3, 4, 2, 2, 2, 2});
  Tensor gamma = Tensor::fromF32({4}, {1, 1, 2, 1});
  Tensor beta = Tensor::fromF32({4}, {0, 0, 0, 1});
  Tensor y = run1(OpKind::LayerNorm, {x, gamma, beta}, {{"eps", 1e-5}});
  // Row 0: mean 2.5, variance 1.25; row 1 is constant, so it normalises to beta.
  float r = 1.0f / std::sqrt(1.25f + 1e-5f);
  checkValues(y, {-1.5f * r, -0.5f * r, 2 * 0.5f * r, 1.5f * r + 1, 0, 0, 0, 1});
  CHECK_THROWS_WITH(run1(OpKind::LayerNorm, {x, Tensor::zeros({3}), beta}),
                    "layer_norm: gamma must be f32[4], got f32[3]");
}

TEST_CASE("embedding looks rows up and checks ids", "[kernels][forward]") {
  Tensor table = iota({3, 2});
  Tensor ids = Tensor::fromI32({2, 2}, {2, 0, 1, 2});
  Tensor y = run1(OpKind::Embedding, {table, ids});
  CHECK(y.shape() == Shape{2, 2, 2});
  checkValues(y, {4, 5, 0, 1, 2, 3, 4, 5});
  CHECK_THROWS_WITH(run1(OpKind::Embedding, {table, Tensor::fromI32({1}, {3})}),
                    "embedding: id 3 is outside the vocabulary [0, 3)");
}

TEST_CASE("cross_entropy is the mean negative log-likelihood", "[kernels][forward]") {
  // Uniform logits: log V at every position.
  Tensor uniform = Tensor::zeros({2, 3, 4});
  Tensor labels = Tensor::fromI32({2, 3}, {0, 1, 2, 3, 0, 1});
  CHECK(run1(OpKind::CrossEntropy, {uniform, labels}).item() == Approx(std::log(4.0)));
  // Two positions: -log softmax picks the labelled entry; large logits stay finite.
  Tensor logits = Tensor::fromF32({2, 2}, {0, std::log(3.0f), 1000, 1000});
  Tensor l2 = Tensor::fromI32({2}, {1, 0});
  double expected = (-std::log(0.75) + std::log(2.0)) / 2;
  CHECK(run1(OpKind::CrossEntropy, {logits, l2}).item() == Approx(expected));
  CHECK_THROWS_WITH(run1(OpKind::CrossEntropy, {logits, Tensor::fromI32({2}, {1, 2})}),
                    "cross_entropy: label 2 is outside [0, 2)");
  CHECK_THROWS_AS(run1(OpKind::CrossEntropy, {logits, Tensor::fromI32({3}, {0, 0, 0})}),
                  KernelError);
}

TEST_CASE("reshape infers -1 and keeps order", "[kernels][forward]") {
  Tensor x = iota({2, 3});
  Tensor y = run1(OpKind::Reshape, {x}, {{"shape", std::vector<std::int64_t>{3, -1}}});
  CHECK(y.shape() == Shape{3, 2});
  checkValues(y, values(x));
  CHECK_THROWS_AS(run1(OpKind::Reshape, {x}, {{"shape", std::vector<std::int64_t>{4, -1}}}),
                  KernelError);
  // An i32 tensor reshapes too.
  Tensor ids = run1(OpKind::Reshape, {Tensor::fromI32({2, 2}, {1, 2, 3, 4})},
                    {{"shape", std::vector<std::int64_t>{4}}});
  CHECK(ids.i32()[3] == 4);
  // Nothing is copied: the output shares the input's elements until written.
  Tensor z = run1(OpKind::Reshape, {x}, {{"shape", std::vector<std::int64_t>{6}}});
  CHECK(std::as_const(z).f32().data() == std::as_const(x).f32().data());
  z.f32()[0] = 100;
  CHECK(x.f32()[0] == 0);
}

TEST_CASE("transpose permutes dimensions", "[kernels][forward]") {
  Tensor x = iota({2, 3, 2});
  Tensor y = run1(OpKind::Transpose, {x}, {{"perm", std::vector<std::int64_t>{2, 0, 1}}});
  CHECK(y.shape() == Shape{2, 2, 3});
  // y[c, a, b] = x[a, b, c].
  checkValues(y, {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11});
}

TEST_CASE("transposing the last two axes works in tiles, edges included", "[kernels][forward]") {
  // 2 matrices of 37 x 70: neither side a multiple of the tile; f32 and i32.
  Tensor x = meshflow::runtime::randomNormal({2, 37, 70}, 5);
  Tensor y = run1(OpKind::Transpose, {x}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
  REQUIRE(y.shape() == Shape{2, 70, 37});
  Tensor ids = meshflow::runtime::randomInts({37, 70}, 0, 1000, 6);
  Tensor idsT = run1(OpKind::Transpose, {ids}, {{"perm", std::vector<std::int64_t>{1, 0}}});
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t i = 0; i < 37; ++i)
      for (std::int64_t j = 0; j < 70; ++j) {
        INFO("b " << b << ", i " << i << ", j " << j);
        REQUIRE(y.f32()[(b * 70 + j) * 37 + i] == x.f32()[(b * 37 + i) * 70 + j]);
        REQUIRE(idsT.i32()[j * 37 + i] == ids.i32()[i * 70 + j]);
      }
  Tensor empty = run1(OpKind::Transpose, {Tensor::zeros({3, 0, 4})},
                      {{"perm", std::vector<std::int64_t>{0, 2, 1}}});
  CHECK(empty.shape() == Shape{3, 4, 0});
}

TEST_CASE("concat and split along an axis", "[kernels][forward]") {
  Tensor a = iota({2, 1});
  Tensor b = iota({2, 2}, 10);
  Tensor y = run1(OpKind::Concat, {a, b}, {{"axis", std::int64_t{-1}}});
  CHECK(y.shape() == Shape{2, 3});
  checkValues(y, {0, 10, 11, 1, 12, 13});
  auto parts = runOp(OpKind::Split, {y},
                     {{"axis", std::int64_t{1}}, {"sizes", std::vector<std::int64_t>{1, 2}}}, 2);
  CHECK(parts[0].bitEqual(a));
  CHECK(parts[1].bitEqual(b));
  auto halves = runOp(OpKind::Split, {iota({4})}, {{"axis", std::int64_t{0}}}, 2);
  checkValues(halves[1], {2, 3});
}

TEST_CASE("split_heads and merge_heads are inverse layouts", "[kernels][forward]") {
  // x[b=1, s=2, heads*d=4] with 2 heads of 2.
  Tensor x = iota({1, 2, 4});
  Tensor y = run1(OpKind::SplitHeads, {x}, {{"heads", std::int64_t{2}}});
  CHECK(y.shape() == Shape{1, 2, 2, 2});
  // Head 0 holds columns 0-1 of each position, head 1 columns 2-3.
  checkValues(y, {0, 1, 4, 5, 2, 3, 6, 7});
  CHECK(run1(OpKind::MergeHeads, {y}).bitEqual(x));
}

TEST_CASE("sum and mean remove the reduced axes", "[kernels][forward]") {
  Tensor x = iota({2, 3});
  Tensor rows = run1(OpKind::Sum, {x}, {{"axes", std::vector<std::int64_t>{1}}});
  CHECK(rows.shape() == Shape{2});
  checkValues(rows, {3, 12});
  checkValues(run1(OpKind::Mean, {x}, {{"axes", std::vector<std::int64_t>{0}}}), {1.5, 2.5, 3.5});
  Tensor all = run1(OpKind::Mean, {x}, {{"axes", std::vector<std::int64_t>{0, 1}}});
  CHECK(all.shape().empty());
  CHECK(all.item() == 2.5f);
}

TEST_CASE("causal_mask hides keys after the query", "[kernels][forward]") {
  Tensor x = Tensor::full({1, 2, 2}, 3.0f);
  checkValues(run1(OpKind::CausalMask, {x}), {3, -1e9f, 3, 3});
  checkValues(run1(OpKind::CausalMaskGrad, {x}), {3, 0, 3, 3});
}

TEST_CASE("top_k_gate is a softmax over the k largest", "[kernels][forward]") {
  Tensor logits = Tensor::fromF32({2, 4}, {1, 3, 2, 0, 5, 5, 5, 1});
  Tensor gates = run1(OpKind::TopKGate, {logits}, {{"k", std::int64_t{2}}});
  float e = 1.0f / (1.0f + std::exp(-1.0f));
  // Row 1 ties three ways: the two lowest indices win.
  checkValues(gates, {0, e, 1 - e, 0, 0.5, 0.5, 0, 0});
  CHECK_THROWS_AS(run1(OpKind::TopKGate, {logits}, {{"k", std::int64_t{5}}}), KernelError);
}

TEST_CASE("select takes one index along an axis", "[kernels][forward]") {
  Tensor x = iota({2, 3});
  checkValues(run1(OpKind::Select, {x}, {{"index", std::int64_t{2}}}), {2, 5});
  checkValues(run1(OpKind::Select, {x}, {{"axis", std::int64_t{0}}, {"index", std::int64_t{1}}}),
              {3, 4, 5});
  CHECK_THROWS_AS(run1(OpKind::Select, {x}, {{"index", std::int64_t{3}}}), KernelError);
}

TEST_CASE("backward helpers: reduce_to_shape, broadcast_to, select_grad", "[kernels][backward]") {
  Tensor dy = iota({2, 2, 3});
  // To [3]: summed over the two leading dimensions.
  checkValues(run1(OpKind::ReduceToShape, {dy, Tensor::zeros({3})}), {18, 22, 26});
  // To [2, 1, 3]: summed over the middle dimension only.
  checkValues(run1(OpKind::ReduceToShape, {dy, Tensor::zeros({2, 1, 3})}), {3, 5, 7, 15, 17, 19});
  Tensor x = Tensor::fromF32({2}, {1, 2});
  Tensor like = Tensor::zeros({2, 3});
  checkValues(run1(OpKind::BroadcastTo, {x, like}, {{"axes", std::vector<std::int64_t>{1}}}),
              {1, 1, 1, 2, 2, 2});
  checkValues(run1(OpKind::BroadcastTo, {Tensor::fromF32({3}, {1, 2, 3}), like},
                   {{"axes", std::vector<std::int64_t>{0}}}),
              {1, 2, 3, 1, 2, 3});
  checkValues(run1(OpKind::SelectGrad, {x, like}, {{"index", std::int64_t{1}}}),
              {0, 1, 0, 0, 2, 0});
  Tensor ids = Tensor::fromI32({3}, {1, 1, 0});
  checkValues(run1(OpKind::EmbeddingGrad, {ids, iota({3, 2})}, {{"vocab", std::int64_t{3}}}),
              {4, 5, 2, 4, 0, 0});
}

TEST_CASE("kernels for leaves are refused", "[kernels][errors]") {
  CHECK_THROWS_WITH(run1(OpKind::Input, {}), "input has no kernel: the executor binds it");
}

TEST_CASE("an allocated output must match what the kernel computes", "[kernels][errors]") {
  meshflow::ir::Op op{OpKind::Relu, {}, {}, {}, "", {}, meshflow::ir::Phase::Forward, {}};
  Tensor x = Tensor::zeros({2, 2});
  Tensor wrong = Tensor::zeros({4});
  std::vector<const Tensor*> in = {&x};
  std::vector<Tensor*> out = {&wrong};
  CHECK_THROWS_WITH(meshflow::runtime::cpu::runKernel(op, in, out, {}),
                    "relu: output 0 is f32[4] but the kernel computes f32[2, 2]");
}
