// The optimizer kernels against steps computed by hand.
#include "KernelTestSupport.h"

using namespace kernel_test;
using meshflow::runtime::cpu::KernelError;

namespace {

Attributes adamAttrs(double decay = 0.0, std::int64_t decoupled = 0) {
  return {{"lr", 0.1},   {"beta1", 0.9},          {"beta2", 0.999},
          {"eps", 1e-8}, {"weight_decay", decay}, {"decoupled", decoupled}};
}

}  // namespace

TEST_CASE("global_norm and clip_scale", "[kernels][optimizer]") {
  Tensor norm = run1(OpKind::GlobalNorm, {Tensor::fromF32({1}, {3}), Tensor::fromF32({2}, {4, 0})});
  CHECK(norm.shape().empty());
  CHECK(norm.item() == 5.0f);
  Attributes clip = {{"clip_norm", 1.0}};
  CHECK(run1(OpKind::ClipScale, {norm}, clip).item() == Approx(1.0 / (5.0 + 1e-6)));
  CHECK(run1(OpKind::ClipScale, {Tensor::scalar(0.5f)}, clip).item() == 1.0f);
}

TEST_CASE("sgd_update with momentum, weight decay and a gradient scale", "[kernels][optimizer]") {
  Tensor w = Tensor::fromF32({2}, {1, -2});
  Tensor g = Tensor::fromF32({2}, {0.5, 1});
  Tensor m = Tensor::fromF32({2}, {0.1f, 0});
  Attributes attrs = {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}};
  auto out = runOp(OpKind::SgdUpdate, {w, g, Tensor::scalar(0.5f), m}, attrs, 2);
  // g' = 0.5 g + 0.01 w = [0.26, 0.48]; m' = 0.9 m + g' = [0.35, 0.48]; w' = w - 0.1 m'.
  checkValues(out[1], {0.35f, 0.48f});
  checkValues(out[0], {0.965f, -2.048f});
}

TEST_CASE("adam_update corrects bias with the context step", "[kernels][optimizer]") {
  Tensor w = Tensor::fromF32({1}, {1});
  Tensor scale = Tensor::scalar(1);
  Tensor zero = Tensor::zeros({1});
  // Step 1: m = 0.05, v = 0.00025, and the corrected step is g / |g| = 1.
  auto s1 = runOp(OpKind::AdamUpdate, {w, Tensor::fromF32({1}, {0.5}), scale, zero, zero},
                  adamAttrs(), 3, KernelContext{1, 0});
  checkValues(s1[0], {0.9f});
  checkValues(s1[1], {0.05f});
  checkValues(s1[2], {0.00025f});
  // Step 2 with g = 1: m = 0.145, v = 0.00124975, w = 0.9 - 0.1 · (0.145/0.19) /
  // sqrt(0.00124975/0.001999) = 0.8034818.
  auto s2 = runOp(OpKind::AdamUpdate, {s1[0], Tensor::fromF32({1}, {1}), scale, s1[1], s1[2]},
                  adamAttrs(), 3, KernelContext{2, 0});
  checkValues(s2[0], {0.8034818f});
  checkValues(s2[1], {0.145f});
  checkValues(s2[2], {0.00124975f});
  CHECK_THROWS_AS(
      runOp(OpKind::AdamUpdate, {w, w, scale, zero, zero}, adamAttrs(), 3, KernelContext{0, 0}),
      KernelError);
}

TEST_CASE("adam couples weight decay, adamw decouples it", "[kernels][optimizer]") {
  Tensor w = Tensor::fromF32({1}, {1});
  Tensor g = Tensor::fromF32({1}, {-0.05f});
  Tensor scale = Tensor::scalar(1);
  Tensor zero = Tensor::zeros({1});
  // Coupled: g' = -0.05 + 0.1 · 1 = 0.05 goes through the moments; the step is +1.
  auto adam = runOp(OpKind::AdamUpdate, {w, g, scale, zero, zero}, adamAttrs(0.1, 0), 3);
  checkValues(adam[1], {0.005f});
  checkValues(adam[2], {2.5e-6f});
  checkValues(adam[0], {0.9f});
  // Decoupled: the moments see -0.05 (step -1), and decay adds 0.1 · w = 0.1 outside them.
  auto adamw = runOp(OpKind::AdamUpdate, {w, g, scale, zero, zero}, adamAttrs(0.1, 1), 3);
  checkValues(adamw[1], {-0.005f});
  checkValues(adamw[0], {1.09f});
}

TEST_CASE("the scale input multiplies the gradient", "[kernels][optimizer]") {
  Tensor w = Tensor::fromF32({2}, {1, 1});
  Tensor g = Tensor::fromF32({2}, {2, -4});
  Tensor m = Tensor::zeros({2});
  Attributes plain = {{"lr", 1.0}, {"momentum", 0.0}, {"weight_decay", 0.0}};
  auto out = runOp(OpKind::SgdUpdate, {w, g, Tensor::scalar(0.25f), m}, plain, 2);
  checkValues(out[0], {0.5f, 2.0f});
  CHECK_THROWS_WITH(runOp(OpKind::SgdUpdate, {w, g, w, m}, plain, 2),
                    "sgd_update: scale must be a scalar, got f32[2]");
}

TEST_CASE("the optimizer updates run in place with the same bits", "[kernels][optimizer]") {
  Tensor w = meshflow::runtime::randomNormal({257}, 1), g = meshflow::runtime::randomNormal({257}, 2);
  Tensor m = meshflow::runtime::randomNormal({257}, 3), v = meshflow::runtime::randomNormal({257}, 4);
  for (auto& x : v.f32()) x = x * x;
  Tensor scale = Tensor::scalar(0.5f);
  auto inPlace = [&](OpKind kind, std::vector<Tensor> held, Attributes attrs) {
    for (Tensor& t : held) t.f32();  // storage of their own, as the runtime's state has
    meshflow::ir::Op op{kind, {}, {}, std::move(attrs), "", {}, meshflow::ir::Phase::Update, {}};
    std::vector<const Tensor*> in{&held[0], &g, &scale, &held[1]};
    std::vector<Tensor*> out{&held[0], &held[1]};
    if (held.size() == 3) {
      in.push_back(&held[2]);
      out.push_back(&held[2]);
    }
    const float* before = std::as_const(held[0]).f32().data();
    meshflow::runtime::cpu::runKernel(op, in, out, KernelContext{3, 0});
    CHECK(std::as_const(held[0]).f32().data() == before);  // no new storage
    return held;
  };
  auto adam = runOp(OpKind::AdamUpdate, {w, g, scale, m, v}, adamAttrs(0.01, 1), 3, KernelContext{3, 0});
  auto adamInPlace = inPlace(OpKind::AdamUpdate, {Tensor(w), Tensor(m), Tensor(v)}, adamAttrs(0.01, 1));
  for (std::size_t j = 0; j < 3; ++j) CHECK(adamInPlace[j].bitEqual(adam[j]));
  Attributes sgd = {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}};
  auto plain = runOp(OpKind::SgdUpdate, {w, g, scale, m}, sgd, 2);
  auto sgdInPlace = inPlace(OpKind::SgdUpdate, {Tensor(w), Tensor(m)}, sgd);
  for (std::size_t j = 0; j < 2; ++j) CHECK(sgdInPlace[j].bitEqual(plain[j]));
  // The caller's tensors, shared with the held copies until written, keep their values.
  CHECK(w.bitEqual(meshflow::runtime::randomNormal({257}, 1)));
}
