// Which sgemm the cpu kernels run (Sgemm.h), and OpenBLAS's on one thread.
#include "runtime/cpu/Sgemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <string>

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

// MESHFLOW_CPU_GEMM: unset or "auto" (the own kernel where the CPU has
// AVX-512), "own" (that kernel, or an error without AVX-512) or "openblas".
bool chooseOwnKernel() {
  const char* setting = std::getenv("MESHFLOW_CPU_GEMM");
  const std::string choice = setting ? setting : "auto";
  const bool avx512 = __builtin_cpu_supports("avx512f");
  if (choice == "auto") return avx512;
  if (choice == "openblas") return false;
  if (choice == "own" && avx512) return true;
  if (choice == "own")
    throw std::runtime_error(
        "MESHFLOW_CPU_GEMM=own needs a CPU with AVX-512; this one has none (use auto or openblas)");
  throw std::runtime_error("MESHFLOW_CPU_GEMM is '" + choice + "'; expected auto, own or openblas");
}

bool usesOwnKernel() {
  static const bool own = chooseOwnKernel();
  return own;
}

}  // namespace

void openblasSgemm(const float* a, const float* b, float* y, const GemmShape& s) {
  limitBlasToOneThread();
  cblas_sgemm(CblasRowMajor, s.transposeA ? CblasTrans : CblasNoTrans,
              s.transposeB ? CblasTrans : CblasNoTrans, static_cast<int>(s.m),
              static_cast<int>(s.n), static_cast<int>(s.k), 1.0f, a,
              static_cast<int>(s.transposeA ? s.m : s.k), b,
              static_cast<int>(s.transposeB ? s.k : s.n), 0.0f, y, static_cast<int>(s.n));
}

void sgemm(const float* a, const float* b, float* y, const GemmShape& shape) {
  if (usesOwnKernel() && ownSgemm(a, b, y, shape)) return;
  if (shape.m == 0 || shape.n == 0) return;
  if (shape.k == 0) {
    std::fill(y, y + shape.m * shape.n, 0.0f);
    return;
  }
  openblasSgemm(a, b, y, shape);
}

const char* sgemmImplementation() { return usesOwnKernel() ? "avx512" : "openblas"; }

}  // namespace meshflow::runtime::cpu
