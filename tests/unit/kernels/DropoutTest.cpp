// Dropout masks are a pure function of (seed, op, step, element index).
#include "KernelTestSupport.h"

using namespace kernel_test;
using meshflow::runtime::cpu::dropoutKeep;

namespace {

Tensor drop(const Tensor& x, double p, std::int64_t seed, KernelContext ctx) {
  return run1(OpKind::Dropout, {x}, {{"p", p}, {"seed", seed}}, ctx);
}

}  // namespace

TEST_CASE("dropout is deterministic and keyed by seed, op and step", "[kernels][dropout]") {
  Tensor x = Tensor::full({64, 64}, 1.0f);
  Tensor y = drop(x, 0.3, 7, {5, 2});
  CHECK(y.bitEqual(drop(x, 0.3, 7, {5, 2})));
  CHECK_FALSE(y.bitEqual(drop(x, 0.3, 7, {6, 2})));  // another step
  CHECK_FALSE(y.bitEqual(drop(x, 0.3, 7, {5, 3})));  // another op
  CHECK_FALSE(y.bitEqual(drop(x, 0.3, 8, {5, 2})));  // another seed

  // Inverted dropout: kept values are scaled by 1 / (1 - p), and the kernel's
  // mask is dropoutKeep's.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < y.f32().size(); ++i) {
    bool keep = dropoutKeep(7, 2, 5, i, 0.3);
    CHECK(y.f32()[i] == (keep ? Approx(1.0 / 0.7) : Approx(0.0)));
    kept += keep;
  }
  double fraction = static_cast<double>(kept) / static_cast<double>(y.elements());
  CHECK(fraction == Approx(0.7).margin(0.02));
}

TEST_CASE("dropout_grad redraws the forward op's mask", "[kernels][dropout]") {
  Tensor x = meshflow::runtime::randomNormal({10, 10}, 3);
  KernelContext forward{4, 11};
  Tensor y = drop(x, 0.5, 1, forward);
  Tensor dy = Tensor::full({10, 10}, 2.0f);
  // The forward op named by attribute, and by the op's link to its forward op.
  Tensor byAttr =
      run1(OpKind::DropoutGrad, {dy},
           {{"p", 0.5}, {"seed", std::int64_t{1}}, {"forward_op", std::int64_t{11}}}, {4, 40});
  meshflow::ir::Op linked{
      OpKind::DropoutGrad,           {}, {}, {{"p", 0.5}, {"seed", std::int64_t{1}}}, "", {},
      meshflow::ir::Phase::Backward, 11};
  Tensor byLink;
  std::vector<const Tensor*> in = {&dy};
  std::vector<Tensor*> out = {&byLink};
  meshflow::runtime::cpu::runKernel(linked, in, out, {4, 40});
  CHECK(byLink.bitEqual(byAttr));
  for (std::size_t i = 0; i < y.f32().size(); ++i) {
    CHECK((y.f32()[i] != 0) == (byAttr.f32()[i] != 0));
    CHECK(byAttr.f32()[i] == (y.f32()[i] != 0 ? 4.0f : 0.0f));
  }
}

TEST_CASE("dropout with p = 0 is the identity, with p = 1 zero", "[kernels][dropout]") {
  Tensor x = meshflow::runtime::randomNormal({5, 5}, 4);
  CHECK(drop(x, 0.0, 1, {}).bitEqual(x));
  CHECK(drop(x, 1.0, 1, {}).bitEqual(Tensor::zeros({5, 5})));
}
