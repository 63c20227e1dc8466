// The one CBLAS call the cpu matmul kernel makes (runtime/cpu/MatMulKernels.cpp),
// for the standalone GPU check, whose machine has no BLAS: ReferenceSgemm.cpp
// implements it as a plain triple loop, the reference the cuBLAS GEMMs are
// checked against there. The main build uses the system's CBLAS instead.
#pragma once

extern "C" {

enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };

void cblas_sgemm(CBLAS_ORDER order, CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, int m, int n, int k,
                 float alpha, const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);
}
