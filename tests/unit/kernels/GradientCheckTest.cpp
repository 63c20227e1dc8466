// Gradient checks: for every forward op that has a backward, the gradient the
// backward kernels compute (as autodiff would compose them) against central
// finite differences of Σ dy · f(x), with a random upstream gradient dy.
#include <cmath>

#include "KernelTestSupport.h"

using namespace kernel_test;
using meshflow::runtime::randomInts;
using meshflow::runtime::randomNormal;

namespace {

using Ints = std::vector<std::int64_t>;

// Normal values pushed at least `gap` away from 0, for ops with a kink there.
Tensor awayFromZero(Shape shape, std::uint64_t seed, float gap = 0.1f) {
  Tensor t = randomNormal(std::move(shape), seed);
  for (float& v : t.f32()) v += v < 0 ? -gap : gap;
  return t;
}

Tensor reduceTo(const Tensor& dy, const Tensor& like) {
  return run1(OpKind::ReduceToShape, {dy, like});
}

Tensor transpose2(const Tensor& x) { return run1(OpKind::Transpose, {x}, {{"perm", Ints{1, 0}}}); }

}  // namespace

TEST_CASE("matmul gradients", "[kernels][gradient]") {
  auto f = [](const std::vector<Tensor>& x) { return run1(OpKind::MatMul, {x[0], x[1]}); };
  SECTION("a[3, 4] x b[4, 5]") {
    Tensor a = randomNormal({3, 4}, 1), b = randomNormal({4, 5}, 2), dy = randomNormal({3, 5}, 3);
    // dA = dY · Bᵀ, dB = Aᵀ · dY.
    checkGradient1(f, {a, b}, 0, dy,
                   run1(OpKind::MatMul, {dy, b}, {{"transpose_b", std::int64_t{1}}}));
    checkGradient1(f, {a, b}, 1, dy, run1(OpKind::MatMul, {transpose2(a), dy}));
  }
  SECTION("a[2, 3, 4] x b[4, 5]: the shared operand's gradient sums over the batch") {
    Tensor a = randomNormal({2, 3, 4}, 4), b = randomNormal({4, 5}, 5);
    Tensor dy = randomNormal({2, 3, 5}, 6);
    checkGradient1(f, {a, b}, 0, dy,
                   run1(OpKind::MatMul, {dy, b}, {{"transpose_b", std::int64_t{1}}}));
    Tensor a2 = run1(OpKind::Reshape, {a}, {{"shape", Ints{6, 4}}});
    Tensor dy2 = run1(OpKind::Reshape, {dy}, {{"shape", Ints{6, 5}}});
    checkGradient1(f, {a, b}, 1, dy, run1(OpKind::MatMul, {transpose2(a2), dy2}));
  }
  SECTION("batched a[2, 3, 4] x b[2, 5, 4] transposed") {
    auto ft = [](const std::vector<Tensor>& x) {
      return run1(OpKind::MatMul, {x[0], x[1]}, {{"transpose_b", std::int64_t{1}}});
    };
    Tensor a = randomNormal({2, 3, 4}, 7), b = randomNormal({2, 5, 4}, 8);
    Tensor dy = randomNormal({2, 3, 5}, 9);
    // dA = dY · B, dB = dYᵀ · A per batch entry.
    checkGradient1(ft, {a, b}, 0, dy, run1(OpKind::MatMul, {dy, b}));
    Tensor dyT = run1(OpKind::Transpose, {dy}, {{"perm", Ints{0, 2, 1}}});
    checkGradient1(ft, {a, b}, 1, dy, run1(OpKind::MatMul, {dyT, a}));
  }
}

TEST_CASE("broadcasting binary op gradients", "[kernels][gradient]") {
  Tensor a = randomNormal({2, 3, 4}, 11);
  Tensor dy = randomNormal({2, 3, 4}, 12);
  // b broadcasts two ways: over the leading dims, and over a middle dim of size 1.
  for (Shape bShape : {Shape{4}, Shape{3, 1}}) {
    Tensor b = randomNormal(bShape, 13);
    for (float& v : b.f32()) v = 1.5f + std::abs(v);  // keep Div away from 0
    INFO("b is " << b.typeText());
    auto op = [](OpKind kind) {
      return [kind](const std::vector<Tensor>& x) { return run1(kind, {x[0], x[1]}); };
    };
    checkGradient1(op(OpKind::Add), {a, b}, 0, dy, reduceTo(dy, a));
    checkGradient1(op(OpKind::Add), {a, b}, 1, dy, reduceTo(dy, b));
    checkGradient1(op(OpKind::Sub), {a, b}, 0, dy, reduceTo(dy, a));
    checkGradient1(op(OpKind::Sub), {a, b}, 1, dy, reduceTo(run1(OpKind::Neg, {dy}), b));
    checkGradient1(op(OpKind::Mul), {a, b}, 0, dy, reduceTo(run1(OpKind::Mul, {dy, b}), a));
    checkGradient1(op(OpKind::Mul), {a, b}, 1, dy, reduceTo(run1(OpKind::Mul, {dy, a}), b));
    checkGradient1(op(OpKind::Div), {a, b}, 0, dy, reduceTo(run1(OpKind::Div, {dy, b}), a));
    // d(a/b)/db = -a / b².
    Tensor q = run1(OpKind::Div, {run1(OpKind::Mul, {dy, a}), run1(OpKind::Mul, {b, b})});
    checkGradient1(op(OpKind::Div), {a, b}, 1, dy, reduceTo(run1(OpKind::Neg, {q}), b));
  }
}

TEST_CASE("unary op gradients", "[kernels][gradient]") {
  Tensor x = awayFromZero({3, 5}, 21);
  Tensor dy = randomNormal({3, 5}, 22);
  auto f = [](OpKind kind, Attributes attrs = {}) {
    return [kind, attrs](const std::vector<Tensor>& in) { return run1(kind, {in[0]}, attrs); };
  };
  checkGradient1(f(OpKind::Neg), {x}, 0, dy, run1(OpKind::Neg, {dy}));
  checkGradient1(f(OpKind::Relu), {x}, 0, dy, run1(OpKind::ReluGrad, {x, dy}));
  checkGradient1(f(OpKind::Gelu), {x}, 0, dy, run1(OpKind::GeluGrad, {x, dy}));
  Tensor t = run1(OpKind::Tanh, {x});
  checkGradient1(f(OpKind::Tanh), {x}, 0, dy, run1(OpKind::TanhGrad, {t, dy}));
  Tensor s = run1(OpKind::Sigmoid, {x});
  checkGradient1(f(OpKind::Sigmoid), {x}, 0, dy, run1(OpKind::SigmoidGrad, {s, dy}));
  Tensor e = run1(OpKind::Exp, {x});
  checkGradient1(f(OpKind::Exp), {x}, 0, dy, run1(OpKind::Mul, {dy, e}));
  Attributes factor = {{"factor", 0.75}};
  checkGradient1(f(OpKind::Scale, factor), {x}, 0, dy, run1(OpKind::Scale, {dy}, factor));
  // rsqrt on positive inputs of moderate size (e^(x/4)), where the finite
  // difference is accurate; autodiff's rule: dx = dy · y³ · (−½).
  Tensor positive = run1(OpKind::Exp, {run1(OpKind::Scale, {x}, {{"factor", 0.25}})});
  Attributes eps = {{"eps", 1e-3}};
  Tensor r = run1(OpKind::Rsqrt, {positive}, eps);
  Tensor r3 = run1(OpKind::Mul, {run1(OpKind::Mul, {r, r}), r});
  checkGradient1(f(OpKind::Rsqrt, eps), {positive}, 0, dy,
                 run1(OpKind::Scale, {run1(OpKind::Mul, {dy, r3})}, {{"factor", -0.5}}));
}

TEST_CASE("softmax and layer_norm gradients", "[kernels][gradient]") {
  Tensor x = randomNormal({3, 6}, 31);
  Tensor dy = randomNormal({3, 6}, 32);
  Tensor y = run1(OpKind::Softmax, {x});
  checkGradient1([](const std::vector<Tensor>& in) { return run1(OpKind::Softmax, {in[0]}); }, {x},
                 0, dy, run1(OpKind::SoftmaxGrad, {y, dy}));

  Tensor gamma = randomNormal({6}, 33), beta = randomNormal({6}, 34);
  Attributes eps = {{"eps", 1e-5}};
  auto ln = [eps](const std::vector<Tensor>& in) {
    return run1(OpKind::LayerNorm, {in[0], in[1], in[2]}, eps);
  };
  auto grads = runOp(OpKind::LayerNormGrad, {x, gamma, dy}, eps, 3);
  checkGradient1(ln, {x, gamma, beta}, 0, dy, grads[0]);
  checkGradient1(ln, {x, gamma, beta}, 1, dy, grads[1]);
  checkGradient1(ln, {x, gamma, beta}, 2, dy, grads[2]);
}

TEST_CASE("embedding and cross_entropy gradients", "[kernels][gradient]") {
  Tensor table = randomNormal({5, 3}, 41);
  Tensor ids = Tensor::fromI32({2, 3}, {4, 0, 4, 1, 4, 2});  // repeats accumulate
  Tensor dy = randomNormal({2, 3, 3}, 42);
  checkGradient1(
      [&](const std::vector<Tensor>& in) {
        return run1(OpKind::Embedding, {in[0], ids});
      },
      {table}, 0, dy, run1(OpKind::EmbeddingGrad, {ids, dy}, {{"vocab", std::int64_t{5}}}));

  Tensor logits = randomNormal({2, 3, 7}, 43, 2.0f);
  Tensor labels = randomInts({2, 3}, 0, 7, 44);
  Tensor dloss = Tensor::scalar(1.7f);
  checkGradient1(
      [&](const std::vector<Tensor>& in) {
        return run1(OpKind::CrossEntropy, {in[0], labels});
      },
      {logits}, 0, dloss, run1(OpKind::CrossEntropyGrad, {logits, labels, dloss}));
}

TEST_CASE("layout op gradients", "[kernels][gradient]") {
  Tensor x = randomNormal({2, 3, 4}, 51);
  SECTION("reshape") {
    Attributes to = {{"shape", Ints{4, -1}}};
    Tensor dy = randomNormal({4, 6}, 52);
    checkGradient1(
        [&](const std::vector<Tensor>& in) { return run1(OpKind::Reshape, {in[0]}, to); }, {x}, 0,
        dy, run1(OpKind::Reshape, {dy}, {{"shape", Ints{2, 3, 4}}}));
  }
  SECTION("transpose") {
    Attributes perm = {{"perm", Ints{2, 0, 1}}};
    Tensor dy = randomNormal({4, 2, 3}, 53);
    checkGradient1(
        [&](const std::vector<Tensor>& in) { return run1(OpKind::Transpose, {in[0]}, perm); }, {x},
        0, dy, run1(OpKind::Transpose, {dy}, {{"perm", Ints{1, 2, 0}}}));
  }
  SECTION("concat and split") {
    Tensor z = randomNormal({2, 2, 4}, 54);
    Attributes axis = {{"axis", std::int64_t{1}}, {"sizes", Ints{3, 2}}};
    Tensor dy = randomNormal({2, 5, 4}, 55);
    auto cat = [&](const std::vector<Tensor>& in) {
      return run1(OpKind::Concat, {in[0], in[1]}, axis);
    };
    auto grads = runOp(OpKind::Split, {dy}, axis, 2);
    checkGradient1(cat, {x, z}, 0, dy, grads[0]);
    checkGradient1(cat, {x, z}, 1, dy, grads[1]);
    // Split's gradient concatenates the output gradients.
    std::vector<Tensor> dys = {randomNormal({2, 3, 4}, 56), randomNormal({2, 2, 4}, 57)};
    checkGradient(
        [&](const std::vector<Tensor>& in) { return runOp(OpKind::Split, {in[0]}, axis, 2); }, {dy},
        0, dys, run1(OpKind::Concat, dys, axis));
  }
  SECTION("split_heads and merge_heads") {
    Attributes heads = {{"heads", std::int64_t{2}}};
    Tensor dy = randomNormal({2, 2, 3, 2}, 58);
    checkGradient1(
        [&](const std::vector<Tensor>& in) { return run1(OpKind::SplitHeads, {in[0]}, heads); },
        {x}, 0, dy, run1(OpKind::MergeHeads, {dy}));
    Tensor h = randomNormal({2, 2, 3, 2}, 59);
    Tensor dm = randomNormal({2, 3, 4}, 60);
    checkGradient1([&](const std::vector<Tensor>& in) { return run1(OpKind::MergeHeads, {in[0]}); },
                   {h}, 0, dm, run1(OpKind::SplitHeads, {dm}, heads));
  }
  SECTION("select") {
    Attributes at = {{"axis", std::int64_t{1}}, {"index", std::int64_t{2}}};
    Tensor dy = randomNormal({2, 4}, 61);
    checkGradient1([&](const std::vector<Tensor>& in) { return run1(OpKind::Select, {in[0]}, at); },
                   {x}, 0, dy, run1(OpKind::SelectGrad, {dy, x}, at));
  }
}

TEST_CASE("reduction gradients", "[kernels][gradient]") {
  Tensor x = randomNormal({2, 3, 4}, 71);
  Attributes axes = {{"axes", Ints{0, 2}}};
  Tensor dy = randomNormal({3}, 72);
  Tensor spread = run1(OpKind::BroadcastTo, {dy, x}, axes);
  checkGradient1([&](const std::vector<Tensor>& in) { return run1(OpKind::Sum, {in[0]}, axes); },
                 {x}, 0, dy, spread);
  checkGradient1([&](const std::vector<Tensor>& in) { return run1(OpKind::Mean, {in[0]}, axes); },
                 {x}, 0, dy, run1(OpKind::Scale, {spread}, {{"factor", 1.0 / 8}}));
}

TEST_CASE("dropout, causal_mask and top_k_gate gradients", "[kernels][gradient]") {
  Tensor x = randomNormal({4, 4}, 81);
  Tensor dy = randomNormal({4, 4}, 82);
  SECTION("dropout: the backward redraws the forward mask") {
    KernelContext ctx{3, 17};
    Attributes attrs = {{"p", 0.5}, {"seed", std::int64_t{9}}};
    Attributes gradAttrs = attrs;
    gradAttrs["forward_op"] = std::int64_t{17};
    checkGradient1(
        [&](const std::vector<Tensor>& in) { return run1(OpKind::Dropout, {in[0]}, attrs, ctx); },
        {x}, 0, dy, run1(OpKind::DropoutGrad, {dy}, gradAttrs, ctx));
  }
  SECTION("causal_mask") {
    Tensor s = randomNormal({2, 3, 3}, 83);
    Tensor ds = randomNormal({2, 3, 3}, 84);
    checkGradient1([](const std::vector<Tensor>& in) { return run1(OpKind::CausalMask, {in[0]}); },
                   {s}, 0, ds, run1(OpKind::CausalMaskGrad, {ds}));
  }
  SECTION("top_k_gate") {
    // Distinct logits, 0.5 apart, so a finite-difference step never changes the choice.
    Tensor logits = Tensor::fromF32({2, 5}, {0.5f, -1.0f, 1.5f, 0.0f, 1.0f,  //
                                             -0.5f, 2.0f, 0.5f, 1.0f, -1.5f});
    Tensor dg = randomNormal({2, 5}, 85);
    Attributes k = {{"k", std::int64_t{3}}};
    Tensor gates = run1(OpKind::TopKGate, {logits}, k);
    checkGradient1(
        [&](const std::vector<Tensor>& in) { return run1(OpKind::TopKGate, {in[0]}, k); }, {logits},
        0, dg, run1(OpKind::TopKGateGrad, {logits, gates, dg}, k));
  }
}
