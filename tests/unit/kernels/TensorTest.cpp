// Host tensors and their test helpers.
#include "KernelTestSupport.h"

using namespace kernel_test;

TEST_CASE("tensors know their dtype, shape and elements", "[tensor]") {
  Tensor t = Tensor::fromF32({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(t.typeText() == "f32[2, 3]");
  CHECK(t.elements() == 6);
  CHECK(t.dim(-1) == 3);
  CHECK(t.bytes() == 24);
  CHECK(Tensor::scalar(2).typeText() == "f32[]");
  CHECK(Tensor::fromI32({2}, {1, 2}).typeText() == "i32[2]");
  CHECK_FALSE(Tensor().allocated());
  CHECK_THROWS_AS(Tensor::fromF32({2}, {1, 2, 3}), std::invalid_argument);
  CHECK_THROWS_AS(Tensor(meshflow::ir::DType::I64, {2}), std::invalid_argument);
  CHECK_THROWS_AS(t.i32(), std::logic_error);
}

TEST_CASE("tensors are zeroed unless asked for uninitialised storage", "[tensor]") {
  using meshflow::ir::DType;
  // Fill a large block and free it, so a new one may reuse its memory.
  { Tensor used = Tensor::full({1 << 12}, 7.0f); }
  Tensor zeros(DType::F32, {1 << 12});
  CHECK(std::all_of(zeros.f32().begin(), zeros.f32().end(), [](float v) { return v == 0.0f; }));
  Tensor ints(DType::I32, {3});
  CHECK(std::all_of(ints.i32().begin(), ints.i32().end(), [](std::int32_t v) { return v == 0; }));
  Tensor raw = Tensor::uninitialized(DType::F32, {2, 3});
  CHECK(raw.allocated());
  CHECK(raw.typeText() == "f32[2, 3]");
  CHECK(raw.f32().size() == 6);
  CHECK(Tensor::uninitialized(DType::I32, {4}).i32().size() == 4);
  CHECK_THROWS_AS(Tensor::uninitialized(DType::I64, {2}), std::invalid_argument);
  CHECK(Tensor::full({2}, 1.5f).f32()[1] == 1.5f);
}

TEST_CASE("bitEqual compares bits; random tensors are seeded", "[tensor]") {
  using meshflow::runtime::randomNormal;
  CHECK(randomNormal({4, 4}, 3).bitEqual(randomNormal({4, 4}, 3)));
  CHECK_FALSE(randomNormal({4, 4}, 3).bitEqual(randomNormal({4, 4}, 4)));
  CHECK_FALSE(Tensor::scalar(0.0f).bitEqual(Tensor::scalar(-0.0f)));
  CHECK_FALSE(Tensor::zeros({2}).bitEqual(Tensor::zeros({2, 1})));
  // Normal(0, 2) over many draws.
  Tensor big = randomNormal({100000}, 1, 2.0f);
  double sum = 0, squares = 0;
  for (float v : big.f32()) {
    sum += v;
    squares += static_cast<double>(v) * v;
  }
  CHECK(sum / 1e5 == Approx(0).margin(0.03));
  CHECK(squares / 1e5 == Approx(4).epsilon(0.03));
}

TEST_CASE("copies and reshapes share elements until one is written", "[tensor]") {
  const Tensor original = Tensor::fromF32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor copy = original;
  Tensor flat = original.reshaped({6});
  CHECK(original.sharesStorage());
  CHECK(copy.f32().data() != nullptr);  // a write access: copy now has its own
  CHECK_FALSE(copy.sharesStorage());
  copy.f32()[0] = 10;
  flat.f32()[5] = 60;
  CHECK(original.f32()[0] == 1);
  CHECK(original.f32()[5] == 6);
  CHECK(copy.f32()[0] == 10);
  CHECK(flat.typeText() == "f32[6]");
  CHECK(flat.f32()[5] == 60);
  // The last holder writes in place.
  Tensor alone = Tensor::fromF32({2}, {1, 2});
  const float* before = std::as_const(alone).f32().data();
  alone.f32()[1] = 3;
  CHECK(std::as_const(alone).f32().data() == before);
  CHECK_THROWS_AS(original.reshaped({4}), std::invalid_argument);
  CHECK_THROWS_AS(Tensor().reshaped({}), std::logic_error);
}

TEST_CASE("a placeholder knows its type but holds nothing", "[tensor]") {
  Tensor p = Tensor::placeholder(meshflow::ir::DType::I32, {4, 2});
  CHECK_FALSE(p.allocated());
  CHECK(p.isPlaceholder());
  CHECK(p.shape() == Shape{4, 2});
  CHECK(p.dtype() == meshflow::ir::DType::I32);
  CHECK_THROWS_AS(p.i32(), std::logic_error);
  CHECK_THROWS_AS(Tensor::placeholder(meshflow::ir::DType::I64, {2}), std::invalid_argument);
}
