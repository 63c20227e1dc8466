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
  CHECK_THROWS_AS(Tensor(meshflow::ir::DType::F16, {2}), std::invalid_argument);
  CHECK_THROWS_AS(t.i32(), std::logic_error);
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
