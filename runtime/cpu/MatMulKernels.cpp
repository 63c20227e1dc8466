// MatMul through OpenBLAS cblas_sgemm, one thread per call.
#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>

#include "runtime/cpu/KernelSupport.h"

#ifdef MESHFLOW_OPENBLAS
// Declared here because the cblas.h an alternatives link points at may be
// another implementation's, without OpenBLAS's extensions.
extern "C" void openblas_set_num_threads(int numThreads);
#endif

namespace meshflow::runtime::cpu {
namespace {

// The virtual cluster runs one CPU thread per device, so a kernel must not fan
// out: OpenBLAS is limited to one thread the first time a GEMM runs. The setting
// is process-wide in OpenBLAS (it has no per-call thread count); setting it once
// through a function-local static is thread-safe and leaves no state of ours.
void limitBlasToOneThread() {
#ifdef MESHFLOW_OPENBLAS
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
#endif
}

struct Transposed {
  bool a = false;
  bool b = false;
};

// y[m, n] = a · b (a is [m, k], or [k, m] when transposed; b is [k, n], or
// [n, k] when transposed). sgemm reads a transposed operand in place.
void gemm(const float* a, const float* b, float* y, std::int64_t m, std::int64_t n, std::int64_t k,
          Transposed t) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(y, y + m * n, 0.0f);
    return;
  }
  cblas_sgemm(CblasRowMajor, t.a ? CblasTrans : CblasNoTrans, t.b ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0f, a,
              static_cast<int>(t.a ? m : k), b, static_cast<int>(t.b ? k : n), 0.0f, y,
              static_cast<int>(n));
}

}  // namespace

void matMul(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& a = args.f32(0);
  const Tensor& b = args.f32(1);
  Transposed t{args.intAttr("transpose_a", 0) != 0, args.intAttr("transpose_b", 0) != 0};
  if (a.rank() < 2 || b.rank() < 2)
    args.fail(
        fmt::format("needs operands of rank 2 or more, got {} and {}", a.typeText(), b.typeText()));
  std::int64_t m = t.a ? a.dim(-1) : a.dim(-2), k = t.a ? a.dim(-2) : a.dim(-1);
  std::int64_t bk = t.b ? b.dim(-1) : b.dim(-2);
  std::int64_t n = t.b ? b.dim(-2) : b.dim(-1);
  if (bk != k)
    args.fail(fmt::format("contracting dimensions differ: {} x {}{}{}", a.typeText(), b.typeText(),
                          t.a ? " (a transposed)" : "", t.b ? " (b transposed)" : ""));
  Shape batch(a.shape().begin(), a.shape().end() - 2);
  Shape yShape = batch;
  yShape.push_back(m);
  yShape.push_back(n);
  Tensor& y = args.outF32(0, yShape);
  limitBlasToOneThread();

  if (b.rank() == 2 && !t.a) {
    // A shared right operand: a's leading dimensions fold into the rows of one GEMM.
    gemm(a.f32().data(), b.f32().data(), y.f32().data(), shapeElements(batch) * m, n, k, t);
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
    gemm(as + i * m * k, bs + (shared ? 0 : i * k * n), ys + i * m * n, m, n, k, t);
}

}  // namespace meshflow::runtime::cpu
