// MatMul: one sgemm (Sgemm.h) per matrix, or one for a whole batch whose
// right operand is shared.
#include <fmt/format.h>

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Sgemm.h"

namespace meshflow::runtime::cpu {

void matMul(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& a = args.f32(0);
  const Tensor& b = args.f32(1);
  const bool ta = args.intAttr("transpose_a", 0) != 0, tb = args.intAttr("transpose_b", 0) != 0;
  if (a.rank() < 2 || b.rank() < 2)
    args.fail(
        fmt::format("needs operands of rank 2 or more, got {} and {}", a.typeText(), b.typeText()));
  std::int64_t m = ta ? a.dim(-1) : a.dim(-2), k = ta ? a.dim(-2) : a.dim(-1);
  std::int64_t bk = tb ? b.dim(-1) : b.dim(-2);
  std::int64_t n = tb ? b.dim(-2) : b.dim(-1);
  if (bk != k)
    args.fail(fmt::format("contracting dimensions differ: {} x {}{}{}", a.typeText(), b.typeText(),
                          ta ? " (a transposed)" : "", tb ? " (b transposed)" : ""));
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  Shape yShape = batch;
  yShape.push_back(m);
  yShape.push_back(n);
  Tensor& y = args.outF32(0, yShape);

  if (b.rank() == 2 && !ta) {
    // A shared right operand: a's leading dimensions fold into the rows of one GEMM.
    sgemm(a.f32().data(), b.f32().data(), y.f32().data(),
          {shapeElements(batch) * m, n, k, false, tb});
    return;
  }
  // One GEMM per matrix of a: with a batched b, against its matrix; with a
  // shared b (and a transposed, whose matrices do not fold into rows), against b.
  const bool shared = b.rank() == 2;
  if (!shared && Shape(b.shape().begin(), b.shape().end() - 2) != batch)
    args.fail(fmt::format("batch dimensions differ: {} x {}", a.typeText(), b.typeText()));
  const float* as = a.f32().data();
  const float* bs = b.f32().data();
  float* ys = y.f32().data();
  for (std::int64_t i = 0; i < shapeElements(batch); ++i)
    sgemm(as + i * m * k, bs + (shared ? 0 : i * k * n), ys + i * m * n, {m, n, k, ta, tb});
}

}  // namespace meshflow::runtime::cpu
