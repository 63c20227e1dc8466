// Mixture-of-experts kernels: dispatch into per-expert slots with a capacity,
// combine back weighted by the gates, the dropped count, and the gradients of
// dispatch and combine — against a hand-computed routing, against the dense
// formulation (every expert on every token, weighted by the gates), and
// against finite differences on random inputs.
#include "KernelTestSupport.h"

using namespace kernel_test;
using meshflow::runtime::randomNormal;

namespace {

using Ints = std::vector<std::int64_t>;

Attributes capacity(std::int64_t c) { return {{"capacity", c}}; }

// Top-k gates of random logits [B, S, E].
Tensor randomGates(Shape shape, std::int64_t k, std::uint64_t seed) {
  return run1(OpKind::TopKGate, {randomNormal(std::move(shape), seed)}, {{"k", k}});
}

// Experts [E, h, f] as one batched matmul over the expert dimension.
Tensor experts(const Tensor& slots, const Tensor& w) { return run1(OpKind::MatMul, {slots, w}); }

// Expert e's weight [h, f] of w [E, h, f].
Tensor expertWeight(const Tensor& w, std::int64_t e) {
  std::int64_t h = w.dim(1), f = w.dim(2);
  std::vector<float> v(w.f32().begin() + e * h * f, w.f32().begin() + (e + 1) * h * f);
  return Tensor::fromF32({h, f}, v);
}

}  // namespace

TEST_CASE("moe_dispatch and moe_combine route tokens in order up to the capacity",
          "[kernels][moe]") {
  // One sequence of 3 tokens, 2 experts, capacity 1: token 0 takes expert 0's
  // and expert 1's only slots, so token 1's and token 2's choices are dropped.
  Tensor x = Tensor::fromF32({1, 3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor gates = Tensor::fromF32({1, 3, 2}, {0.75f, 0.25f, 1.0f, 0.0f, 0.5f, 0.5f});
  Tensor slots = run1(OpKind::MoeDispatch, {x, gates}, capacity(1));
  REQUIRE(slots.shape() == Shape{2, 1, 2});
  checkValues(slots, {1, 2, 1, 2});
  CHECK(run1(OpKind::MoeDropped, {gates}, capacity(1)).item() == 3);
  // Experts that double their slot: token 0 gets 0.75·2x + 0.25·2x; the others 0.
  Tensor y = run1(OpKind::Scale, {slots}, {{"factor", 2.0}});
  checkValues(run1(OpKind::MoeCombine, {y, gates}, capacity(1)), {2, 4, 0, 0, 0, 0});

  // Capacity 2: token 1 takes expert 0's second slot, token 2 expert 1's.
  Tensor slots2 = run1(OpKind::MoeDispatch, {x, gates}, capacity(2));
  REQUIRE(slots2.shape() == Shape{2, 2, 2});
  checkValues(slots2, {1, 2, 3, 4, 1, 2, 5, 6});
  CHECK(run1(OpKind::MoeDropped, {gates}, capacity(2)).item() == 1);  // token 2's expert 0
  checkValues(run1(OpKind::MoeCombine, {slots2, gates}, capacity(2)), {1, 2, 3, 4, 2.5f, 3});
}

TEST_CASE("moe_dropped counts the choices past each expert's capacity per group",
          "[kernels][moe]") {
  // Independent of the kernel's slot walk: per group and expert, the choices
  // over the capacity.
  const std::int64_t B = 3, S = 7, E = 4, k = 2;
  Tensor gates = randomGates({B, S, E}, k, 5);
  for (std::int64_t c : {1, 2, 3, 7}) {
    double expected = 0;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t e = 0; e < E; ++e) {
        std::int64_t chosen = 0;
        for (std::int64_t s = 0; s < S; ++s)
          chosen += gates.f32()[(b * S + s) * E + e] != 0 ? 1 : 0;
        expected += double(std::max<std::int64_t>(0, chosen - c));
      }
    INFO("capacity " << c);
    CHECK(run1(OpKind::MoeDropped, {gates}, capacity(c)).item() == expected);
    if (c == S) CHECK(expected == 0);
  }
  CHECK(run1(OpKind::MoeDropped, {gates}, capacity(1)).item() > 0);  // the test can see drops
}

TEST_CASE("with room for every token, the capacity MoE equals the dense formulation",
          "[kernels][moe]") {
  // Dense (the stdlib layer before capacities): every expert on every token,
  // out = Σ_e select(gates, e) · expert_e(x).
  const std::int64_t B = 2, S = 5, E = 3, h = 4, f = 6, k = 2;
  Tensor x = randomNormal({B, S, h}, 11);
  Tensor w1 = randomNormal({E, h, f}, 12), w2 = randomNormal({E, f, h}, 13);
  Tensor gates = randomGates({B, S, E}, k, 14);
  Tensor slots = run1(OpKind::MoeDispatch, {x, gates}, capacity(S));
  Tensor y = experts(run1(OpKind::Gelu, {experts(slots, w1)}), w2);
  Tensor moe = run1(OpKind::MoeCombine, {y, gates}, capacity(S));
  CHECK(run1(OpKind::MoeDropped, {gates}, capacity(S)).item() == 0);

  Tensor dense = Tensor::zeros({B, S, h});
  for (std::int64_t e = 0; e < E; ++e) {
    Tensor ye =
        run1(OpKind::MatMul, {run1(OpKind::Gelu, {run1(OpKind::MatMul, {x, expertWeight(w1, e)})}),
                              expertWeight(w2, e)});
    Tensor ge = run1(OpKind::Select, {gates}, {{"axis", std::int64_t{2}}, {"index", e}});
    Tensor weighted =
        run1(OpKind::Mul, {ye, run1(OpKind::Reshape, {ge}, {{"shape", Ints{B, S, 1}}})});
    dense = run1(OpKind::Add, {dense, weighted});
  }
  checkValues(moe, values(dense), 1e-4);

  // A smaller capacity drops choices, and the output then differs.
  Tensor tight = run1(
      OpKind::MoeCombine,
      {experts(
           run1(OpKind::Gelu, {experts(run1(OpKind::MoeDispatch, {x, gates}, capacity(1)), w1)}),
           w2),
       gates},
      capacity(1));
  CHECK_FALSE(tight.bitEqual(moe));
}

TEST_CASE("moe_dispatch and moe_combine gradients", "[kernels][moe][gradient]") {
  const std::int64_t B = 2, S = 4, E = 3, h = 3, k = 2, C = 2;  // C < S·k/E: some choices drop
  Tensor x = randomNormal({B, S, h}, 21);
  Tensor gates = randomGates({B, S, E}, k, 22);
  REQUIRE(run1(OpKind::MoeDropped, {gates}, capacity(C)).item() > 0);
  SECTION("dispatch: dx gathers each kept slot's gradient back to its token") {
    Tensor dd = randomNormal({E, B * C, h}, 23);
    checkGradient1(
        [&](const std::vector<Tensor>& in) {
          return run1(OpKind::MoeDispatch, {in[0], gates}, capacity(C));
        },
        {x}, 0, dd, run1(OpKind::MoeDispatchGrad, {dd, gates}, capacity(C)));
  }
  SECTION("combine: dy and dgates") {
    Tensor y = randomNormal({E, B * C, h}, 24);
    Tensor dout = randomNormal({B, S, h}, 25);
    auto grads = runOp(OpKind::MoeCombineGrad, {y, gates, dout}, capacity(C), 2);
    checkGradient1(
        [&](const std::vector<Tensor>& in) {
          return run1(OpKind::MoeCombine, {in[0], gates}, capacity(C));
        },
        {y}, 0, dout, grads[0]);
    // A zero gate is an expert not chosen: nudging it would change the routing,
    // which the gradient (like the top-k choice) treats as constant, so the
    // difference quotient keeps the zeros at zero.
    Tensor chosen = gates;
    for (float& v : chosen.f32()) v = v != 0 ? 1.0f : 0.0f;
    checkGradient1(
        [&](const std::vector<Tensor>& in) {
          return run1(OpKind::MoeCombine, {y, run1(OpKind::Mul, {in[0], chosen})}, capacity(C));
        },
        {gates}, 0, dout, grads[1]);
    // Dropped and unchosen choices get no gradient; kept ones do.
    Tensor slotsOfOnes =
        run1(OpKind::MoeDispatch, {Tensor::full({B, S, 1}, 1.0f), gates}, capacity(C));
    double kept = 0;
    for (float v : slotsOfOnes.f32()) kept += v;
    double nonzero = 0;
    for (float v : grads[1].f32()) nonzero += v != 0 ? 1 : 0;
    CHECK(nonzero == kept);
  }
}

TEST_CASE("moe kernels refuse tensors that do not match the routing", "[kernels][moe]") {
  Tensor gates = randomGates({2, 3, 4}, 2, 31);
  CHECK_THROWS_AS(run1(OpKind::MoeDispatch, {randomNormal({2, 4, 5}, 32), gates}, capacity(2)),
                  meshflow::runtime::cpu::KernelError);
  CHECK_THROWS_AS(run1(OpKind::MoeCombine, {randomNormal({4, 6, 5}, 33), gates}, capacity(2)),
                  meshflow::runtime::cpu::KernelError);
  CHECK_THROWS_AS(run1(OpKind::MoeDropped, {gates}, capacity(0)),
                  meshflow::runtime::cpu::KernelError);
}
