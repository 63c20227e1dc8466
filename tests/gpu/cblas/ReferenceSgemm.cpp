// cblas_sgemm as a triple loop with a double accumulator, row-major only
// (what runtime/cpu/MatMulKernels.cpp asks for). Slow; the parity test keeps
// its GEMMs small.
#include <cstdio>
#include <cstdlib>

#include "cblas.h"

extern "C" void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, int m, int n,
                            int k, float alpha, const float* a, int lda, const float* b, int ldb, float beta,
                            float* c, int ldc) {
  if (order != CblasRowMajor) {
    std::fprintf(stderr, "reference cblas_sgemm: only row-major is implemented\n");
    std::abort();
  }
  const bool ta = transA == CblasTrans, tb = transB == CblasTrans;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p)
        sum += double(ta ? a[p * lda + i] : a[i * lda + p]) * double(tb ? b[j * ldb + p] : b[p * ldb + j]);
      float& y = c[i * ldc + j];
      y = float(alpha * sum + (beta == 0.0f ? 0.0 : double(beta) * y));
    }
}
