// Which GPU ops read half-precision operands as they are stored and which
// widen them to f32 copies (runtime/cuda/OperandPath.h), without a GPU; and
// the cpu sum plan the GPU's sums share, on half operands.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <string>

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cuda/OperandPath.h"

namespace cuda = meshflow::runtime::cuda;
namespace cpu = meshflow::runtime::cpu;
namespace ir = meshflow::ir;
using meshflow::runtime::Tensor;
using K = ir::OpKind;
using Path = cuda::OperandPath;

namespace {

Path pathOf(K kind, std::vector<const Tensor*> in, std::vector<Tensor*> out = {}) {
  ir::Op op;
  op.kind = kind;
  if (out.empty()) out.assign(kind == K::LayerNormGrad ? 3 : kind == K::AdamUpdate ? 3 : kind == K::SgdUpdate ? 2 : 1,
                              nullptr);
  return cuda::operandPathOf(op, in, out);
}

Tensor typedAs(ir::DType dtype, meshflow::runtime::Shape shape) { return Tensor::placeholder(dtype, std::move(shape)); }

}  // namespace

TEST_CASE("ops without a half operand, and moves of elements, take their operands as stored", "[cuda]") {
  Tensor a = Tensor::zeros({2, 3}), ah = a.castTo(ir::DType::BF16);
  CHECK(pathOf(K::Add, {&a, &a}) == Path::kAsStored);
  CHECK(pathOf(K::LayerNormGrad, {&a, &a, &a}) == Path::kAsStored);
  CHECK(pathOf(K::MatMul, {&ah, &ah}) == Path::kAsStored);
  CHECK(pathOf(K::Transpose, {&ah}) == Path::kAsStored);
  // An f32 op whose result the caller typed half: widened (rounded after the f32 kernel).
  Tensor halfOut = typedAs(ir::DType::BF16, {2, 3});
  CHECK(pathOf(K::Relu, {&a}, {&halfOut}) == Path::kWidened);
}

TEST_CASE("layer norm and its backward read one half type as stored", "[cuda]") {
  for (ir::DType half : {ir::DType::BF16, ir::DType::F16}) {
    Tensor x = Tensor::zeros({4, 8}).castTo(half), gamma = Tensor::zeros({8}).castTo(half);
    CHECK(pathOf(K::LayerNorm, {&x, &gamma, &gamma}) == Path::kAsStored);
    CHECK(pathOf(K::LayerNormGrad, {&x, &gamma, &x}) == Path::kAsStored);
    // A half model's parameter gradients kept in f32 (ir::kF32Outputs), or in the half type.
    Tensor dx = typedAs(half, {4, 8}), wide = typedAs(ir::DType::F32, {8}), narrow = typedAs(half, {8});
    CHECK(pathOf(K::LayerNormGrad, {&x, &gamma, &x}, {&dx, &wide, &wide}) == Path::kAsStored);
    CHECK(pathOf(K::LayerNormGrad, {&x, &gamma, &x}, {&dx, &narrow, &wide}) == Path::kAsStored);
    // dx in another type than x: the widened path rounds it there.
    Tensor wideDx = typedAs(ir::DType::F32, {4, 8});
    CHECK(pathOf(K::LayerNormGrad, {&x, &gamma, &x}, {&wideDx, &wide, &wide}) == Path::kWidened);
    CHECK(pathOf(K::LayerNorm, {&x, &gamma, &gamma}, {&wideDx}) == Path::kWidened);
  }
  // Mixed types (a bf16 x with f32 gamma, or f16 with bf16): widened.
  Tensor x = Tensor::zeros({4, 8}).castTo(ir::DType::BF16), gamma = Tensor::zeros({8});
  Tensor gammaF16 = gamma.castTo(ir::DType::F16);
  CHECK(pathOf(K::LayerNorm, {&x, &gamma, &gamma}) == Path::kWidened);
  CHECK(pathOf(K::LayerNormGrad, {&x, &gammaF16, &x}) == Path::kWidened);
}

TEST_CASE("the sums read and write any float types as stored", "[cuda]") {
  Tensor dy = Tensor::zeros({2, 3, 4}), bias = Tensor::zeros({4});
  for (ir::DType half : {ir::DType::BF16, ir::DType::F16}) {
    Tensor dyHalf = dy.castTo(half), biasHalf = bias.castTo(half);
    Tensor wide = typedAs(ir::DType::F32, {4}), narrow = typedAs(half, {4});
    CHECK(pathOf(K::ReduceToShape, {&dyHalf, &bias}) == Path::kAsStored);
    CHECK(pathOf(K::ReduceToShape, {&dyHalf, &biasHalf}, {&wide}) == Path::kAsStored);  // a bias gradient in f32
    CHECK(pathOf(K::ReduceToShape, {&dy, &biasHalf}, {&narrow}) == Path::kAsStored);
    CHECK(pathOf(K::Sum, {&dyHalf}) == Path::kAsStored);
    CHECK(pathOf(K::Mean, {&dyHalf}, {&wide}) == Path::kAsStored);
    CHECK(pathOf(K::GlobalNorm, {&dyHalf, &bias}) == Path::kAsStored);
    // BroadcastTo copies: as stored into x's own type only.
    CHECK(pathOf(K::BroadcastTo, {&biasHalf, &dy}) == Path::kAsStored);
    Tensor wideCopy = typedAs(ir::DType::F32, {2, 3, 4});
    CHECK(pathOf(K::BroadcastTo, {&biasHalf, &dy}, {&wideCopy}) == Path::kWidened);
  }
  Tensor ids = Tensor::fromI32({4}, {0, 1, 2, 3});
  Tensor idsOut = typedAs(ir::DType::I32, {});
  CHECK(pathOf(K::Sum, {&ids}, {&idsOut}) == Path::kAsStored);  // no half operand: the kernel's checks name the error
  Tensor halfOut = typedAs(ir::DType::BF16, {});
  CHECK(pathOf(K::Sum, {&ids}, {&halfOut}) == Path::kWidened);  // not a float input: the cpu path's error
}

TEST_CASE("optimizer updates take each operand in its own float type; the scale must be f32", "[cuda]") {
  Tensor w = Tensor::zeros({5}), scale = Tensor::scalar(1.0f);
  for (ir::DType half : {ir::DType::BF16, ir::DType::F16}) {
    Tensor wh = w.castTo(half);
    CHECK(pathOf(K::SgdUpdate, {&wh, &wh, &scale, &w}) == Path::kAsStored);
    CHECK(pathOf(K::AdamUpdate, {&wh, &w, &scale, &w, &w}) == Path::kAsStored);  // f32 gradient and state
    CHECK(pathOf(K::AdamUpdate, {&wh, &wh, &scale, &wh, &wh}) == Path::kAsStored);
    Tensor halfScale = scale.castTo(half);
    CHECK(pathOf(K::AdamUpdate, {&wh, &wh, &halfScale, &wh, &wh}) == Path::kWidened);
  }
}

TEST_CASE("element-wise, row and table ops keep their half paths", "[cuda]") {
  Tensor x = Tensor::zeros({2, 4}).castTo(ir::DType::BF16), f = Tensor::zeros({2, 4});
  Tensor labels = Tensor::fromI32({2}, {0, 1}), dloss = Tensor::scalar(1.0f);
  CHECK(pathOf(K::Add, {&x, &x}) == Path::kAsStored);
  CHECK(pathOf(K::Add, {&x, &f}) == Path::kWidened);
  CHECK(pathOf(K::Softmax, {&x}) == Path::kAsStored);
  CHECK(pathOf(K::CrossEntropy, {&x, &labels}) == Path::kAsStored);
  CHECK(pathOf(K::CrossEntropyGrad, {&x, &labels, &dloss}) == Path::kAsStored);
  Tensor table = Tensor::zeros({6, 4}).castTo(ir::DType::BF16), ids = Tensor::fromI32({2}, {0, 5});
  CHECK(pathOf(K::Embedding, {&table, &ids}) == Path::kAsStored);
  Tensor wideTable = typedAs(ir::DType::F32, {6, 4});
  CHECK(pathOf(K::EmbeddingGrad, {&ids, &x}, {&wideTable}) == Path::kAsStored);
}

TEST_CASE("the sum plan takes half operands as they are, its result in the caller's type", "[cuda]") {
  Tensor dy = Tensor::zeros({2, 3, 4}).castTo(ir::DType::BF16), bias = Tensor::zeros({4});
  ir::Op op;
  op.kind = K::ReduceToShape;
  std::vector<const Tensor*> in{&dy, &bias};
  Tensor untyped;
  std::vector<Tensor*> out{&untyped};
  cpu::KernelContext ctx;
  cpu::SumPlan plan = cpu::sumPlan(cpu::KernelArgs(op, in, out, ctx));
  CHECK(plan.src == &dy);
  CHECK(untyped.dtype() == ir::DType::BF16);  // untyped: x's type, as the widened path gives it
  CHECK(untyped.shape() == meshflow::runtime::Shape{4});
  Tensor wide = Tensor::placeholder(ir::DType::F32, {4});
  out = {&wide};
  cpu::sumPlan(cpu::KernelArgs(op, in, out, ctx));
  CHECK(wide.dtype() == ir::DType::F32);
  CHECK(wide.allocated());
  Tensor ids = Tensor::fromI32({4}, {0, 1, 2, 3});
  op.kind = K::Sum;
  in = {&ids};
  Tensor y;
  out = {&y};
  CHECK_THROWS_WITH(cpu::sumPlan(cpu::KernelArgs(op, in, out, ctx)), Catch::Matchers::Contains("input 0 must be f32"));
}
