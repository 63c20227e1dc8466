// The CPU backend's single-precision GEMM: y = op(a) · op(b), row-major, one
// thread. On a CPU with AVX-512 it is meshflow's own packed kernel; elsewhere
// (or with MESHFLOW_CPU_GEMM=openblas) OpenBLAS's cblas_sgemm.
//
// Why our own: Debian's OpenBLAS 0.3.21 does not know AMD's Zen 4 and Zen 5
// and runs its AVX2 (Haswell) kernels on them, half the vector width the cores
// have. The own kernel is written for AVX-512 and nothing else.
//
// Its reduction order is fixed: each element of y sums its k products in
// order in blocks of kSgemmDepthBlock, one fused multiply-add each, and adds
// the blocks' sums to y in order. The order depends on k alone, never on m,
// n, the transposes or where the element falls in a tile, so a GEMM over some
// rows or columns of another gives those rows or columns to the bit — what
// lets a data- or tensor-parallel plan match the serial executor.
#pragma once

#include <cstdint>

namespace meshflow::runtime::cpu {

/// The depth (k) the own kernel sums before adding into y.
inline constexpr std::int64_t kSgemmDepthBlock = 256;

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  /// a is [k, m] (else [m, k]); b is [n, k] (else [k, n]).
  bool transposeA = false, transposeB = false;
};

/// y[m, n] = op(a) · op(b), y overwritten (every element written, none read).
void sgemm(const float* a, const float* b, float* y, const GemmShape& shape);

/// Which implementation sgemm runs in this process: "avx512" (the own
/// kernel) or "openblas". Chosen once, from the CPU and MESHFLOW_CPU_GEMM.
const char* sgemmImplementation();

/// The own kernel, for tests and benchmarks that compare the two: only on a
/// CPU with AVX-512 (false and y untouched otherwise).
bool ownSgemm(const float* a, const float* b, float* y, const GemmShape& shape);

/// OpenBLAS's cblas_sgemm on one thread, whatever sgemmImplementation says.
void openblasSgemm(const float* a, const float* b, float* y, const GemmShape& shape);

}  // namespace meshflow::runtime::cpu
