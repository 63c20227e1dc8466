// Kernels on f16 and bf16 operands compute in f32 and round once: on random
// inputs (exactly representable in the half type) their results equal the
// f32 kernel's within the half type's rounding, and i32 operands (labels,
// token ids) pass through untouched.
#include "KernelTestSupport.h"

using namespace kernel_test;
using meshflow::ir::DType;
using meshflow::runtime::randomInts;
using meshflow::runtime::randomNormal;

namespace {

// Relative rounding of one half-type result (half a unit in the last place),
// with room for the inputs' own rounding to propagate through one op.
double tolerance(DType dtype) { return dtype == DType::BF16 ? 4 * 0x1.0p-8 : 4 * 0x1.0p-11; }

// `t` rounded to the half type (so both kernels see the same input values).
Tensor exactIn(const Tensor& t, DType dtype) { return t.castTo(dtype).toF32(); }

// Runs `kind` once on f32 inputs and once on the same values in `dtype`
// (i32 inputs unchanged) and requires the half result to round the f32 one.
void compareWithF32(OpKind kind, std::vector<Tensor> inputs, DType dtype, Attributes attrs = {},
                    std::size_t outputs = 1) {
  std::vector<Tensor> half;
  for (Tensor& t : inputs) {
    if (t.dtype() == DType::I32) {
      half.push_back(t);
      continue;
    }
    t = exactIn(t, dtype);
    half.push_back(t.castTo(dtype));
  }
  auto expected = runOp(kind, inputs, attrs, outputs);
  auto actual = runOp(kind, half, attrs, outputs);
  for (std::size_t j = 0; j < outputs; ++j) {
    INFO(meshflow::ir::opName(kind)
         << " in " << meshflow::ir::dtypeName(dtype) << ", output " << j);
    // The loss of cross entropy stays f32; every other result has the inputs' dtype.
    CHECK(actual[j].dtype() == (kind == OpKind::CrossEntropy ? DType::F32 : dtype));
    double scale = 0;
    for (float v : expected[j].f32()) scale = std::max(scale, double(std::abs(v)));
    INFO("max |diff| " << meshflow::runtime::maxAbsDiff(actual[j], expected[j])
                       << " of values up to " << scale);
    CHECK(meshflow::runtime::allClose(actual[j], expected[j], tolerance(dtype),
                                      tolerance(dtype) * scale * 1e-2));
  }
}

}  // namespace

TEST_CASE("half-precision kernels equal the f32 kernels within the half type's rounding",
          "[half][kernels]") {
  for (DType dtype : {DType::BF16, DType::F16}) {
    std::uint64_t seed = dtype == DType::BF16 ? 11 : 29;
    compareWithF32(OpKind::Add, {randomNormal({4, 6}, seed), randomNormal({6}, seed + 1)}, dtype);
    compareWithF32(OpKind::Mul, {randomNormal({4, 6}, seed + 2), randomNormal({4, 6}, seed + 3)},
                   dtype);
    compareWithF32(OpKind::Gelu, {randomNormal({5, 7}, seed + 4)}, dtype);
    compareWithF32(OpKind::Softmax, {randomNormal({3, 9}, seed + 5)}, dtype);
    compareWithF32(
        OpKind::LayerNorm,
        {randomNormal({4, 8}, seed + 6), randomNormal({8}, seed + 7), randomNormal({8}, seed + 8)},
        dtype, {{"eps", 1e-5}});
    compareWithF32(OpKind::Sum, {randomNormal({6, 32}, seed + 9)}, dtype,
                   {{"axes", std::vector<std::int64_t>{1}}});
    compareWithF32(OpKind::Embedding,
                   {randomNormal({10, 4}, seed + 12), randomInts({3, 2}, 0, 10, seed + 13)}, dtype);
    compareWithF32(OpKind::CrossEntropy,
                   {randomNormal({6, 5}, seed + 14), randomInts({6}, 0, 5, seed + 15)}, dtype);
  }
}

TEST_CASE("half matmuls accumulate in f32", "[half][kernels]") {
  // 256 products of ±1-sized values: accumulating in the half type would lose
  // about log2(256) = 8 bits; an f32 accumulator rounds once at the end.
  for (DType dtype : {DType::BF16, DType::F16}) {
    Tensor a = exactIn(randomNormal({3, 256}, 41), dtype),
           b = exactIn(randomNormal({256, 4}, 43), dtype);
    Tensor expected = run1(OpKind::MatMul, {a, b});
    Tensor actual = run1(OpKind::MatMul, {a.castTo(dtype), b.castTo(dtype)});
    CHECK(actual.dtype() == dtype);
    // Exactly the f32 result rounded once.
    CHECK(actual.bitEqual(expected.castTo(dtype)));
  }
}

TEST_CASE("cast rounds to its dtype and overflows f16 to infinity", "[half][kernels]") {
  Tensor x = Tensor::fromF32({3}, {1.0f + 0x1.0p-8f, 7e4f, -2.5f});
  Tensor h = run1(OpKind::Cast, {x}, {{"dtype", std::string("f16")}});
  CHECK(h.typeText() == "f16[3]");
  CHECK(std::isinf(h.toF32().f32()[1]));
  Tensor b = run1(OpKind::Cast, {x}, {{"dtype", std::string("bf16")}});
  CHECK(b.toF32().f32()[0] == 1.0f);
  CHECK(b.toF32().f32()[1] == 70144.0f);  // 7e4 to bf16's 8 significant bits
  Tensor back = run1(OpKind::Cast, {b}, {{"dtype", std::string("f32")}});
  CHECK(back.bitEqual(b.toF32()));
  CHECK_THROWS_AS(run1(OpKind::Cast, {x}, {{"dtype", std::string("i32")}}),
                  meshflow::runtime::cpu::KernelError);
}

TEST_CASE("an overflowed loss-scaled step leaves weights and state untouched", "[half][kernels]") {
  Tensor w = Tensor::fromF32({2}, {1, 2}), g = Tensor::fromF32({2}, {0.5f, -0.5f});
  Tensor m = Tensor::fromF32({2}, {0.1f, 0.2f}), v = Tensor::fromF32({2}, {0.01f, 0.02f});
  Attributes adam = {{"lr", 0.1},
                     {"beta1", 0.9},
                     {"beta2", 0.999},
                     {"eps", 1e-8},
                     {"weight_decay", 0.0},
                     {"decoupled", std::int64_t{0}},
                     {"step", std::int64_t{0}}};
  Tensor inf = Tensor::scalar(std::numeric_limits<float>::infinity());
  Tensor factor = run1(OpKind::ClipScale, {inf, Tensor::scalar(1024)}, {{"clip_norm", 0.0}});
  CHECK(std::isnan(factor.item()));
  auto skipped = runOp(OpKind::AdamUpdate, {w, g, factor, m, v}, adam, 3);
  CHECK(skipped[0].bitEqual(w));
  CHECK(skipped[1].bitEqual(m));
  CHECK(skipped[2].bitEqual(v));
  // A finite norm unscales: the factor is 1 / loss_scale (no clipping).
  CHECK(run1(OpKind::ClipScale, {Tensor::scalar(3), Tensor::scalar(1024)}, {{"clip_norm", 0.0}})
            .item() == 1.0f / 1024);
  // With clipping, the clip sees the unscaled norm 3: min(1, 1.5 / 3) / 1024.
  CHECK(run1(OpKind::ClipScale, {Tensor::scalar(3 * 1024), Tensor::scalar(1024)},
             {{"clip_norm", 1.5}})
            .item() == Approx(0.5 / 1024).epsilon(1e-5));
}

TEST_CASE("the dynamic loss scale halves on overflow and doubles after a window",
          "[half][kernels]") {
  Attributes window = {{"window", std::int64_t{2}}};
  auto step = [&](float scale, std::vector<float> counts, float factor) {
    return runOp(
        OpKind::LossScaleUpdate,
        {Tensor::scalar(scale), Tensor::fromF32({2}, std::move(counts)), Tensor::scalar(factor)},
        window, 2);
  };
  auto overflow = step(1024, {1, 0}, std::numeric_limits<float>::quiet_NaN());
  CHECK(overflow[0].item() == 512);
  CHECK(values(overflow[1]) == std::vector<float>{0, 1});
  auto good = step(1024, {0, 3}, 1.0f / 1024);
  CHECK(good[0].item() == 1024);
  CHECK(values(good[1]) == std::vector<float>{1, 3});
  auto grown = step(1024, {1, 3}, 1.0f / 1024);
  CHECK(grown[0].item() == 2048);
  CHECK(values(grown[1]) == std::vector<float>{0, 3});
  CHECK(step(1, {0, 0}, std::numeric_limits<float>::quiet_NaN())[0].item() == 1);  // never below 1
}

TEST_CASE("layout ops and reshapes move half elements as they are, without widening", "[half][kernels]") {
  // Each op on the half tensor equals the op on its f32 widening, rounded
  // back: the same bits, since every half value is exact in f32.
  const auto same = [](OpKind kind, std::vector<Tensor> inputs, Attributes attrs = {}, std::size_t outputs = 1) {
    for (DType dtype : {DType::BF16, DType::F16}) {
      std::vector<Tensor> half, wide;
      for (const Tensor& t : inputs) {
        half.push_back(t.castTo(dtype));
        wide.push_back(half.back().toF32());
      }
      auto actual = runOp(kind, half, attrs, outputs);
      auto expected = runOp(kind, wide, attrs, outputs);
      for (std::size_t j = 0; j < outputs; ++j) {
        INFO(meshflow::ir::opName(kind) << " in " << meshflow::ir::dtypeName(dtype) << ", output " << j);
        CHECK(actual[j].dtype() == dtype);
        CHECK(actual[j].bitEqual(expected[j].castTo(dtype)));
      }
    }
  };
  same(OpKind::Transpose, {randomNormal({3, 5, 7}, 1)}, {{"perm", std::vector<std::int64_t>{0, 2, 1}}});  // tiled
  same(OpKind::Transpose, {randomNormal({3, 5, 7}, 2)}, {{"perm", std::vector<std::int64_t>{2, 0, 1}}});
  same(OpKind::Concat, {randomNormal({2, 3}, 3), randomNormal({2, 4}, 4)}, {{"axis", std::int64_t{1}}});
  same(OpKind::Split, {randomNormal({4, 6}, 5)}, {{"axis", std::int64_t{1}}}, 2);
  same(OpKind::SplitHeads, {randomNormal({2, 3, 8}, 6)}, {{"heads", std::int64_t{2}}});
  same(OpKind::MergeHeads, {randomNormal({2, 2, 3, 4}, 7)});
  same(OpKind::Reshape, {randomNormal({2, 6}, 8)}, {{"shape", std::vector<std::int64_t>{3, 4}}});
}
