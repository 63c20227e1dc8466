#include "runtime/cuda/Gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <limits>
#include <stdexcept>

#include "runtime/cuda/CudaError.h"

namespace meshflow::runtime::cuda {
namespace {

void expectInt(std::int64_t value, const char* what) {
  if (value < 0) throw std::invalid_argument(fmt::format("GEMM {} is negative ({})", what, value));
  if (value > std::numeric_limits<int>::max())
    throw std::invalid_argument(fmt::format("GEMM {} ({}) does not fit cuBLAS's int", what, value));
}

cudaDataType_t dataType(GemmType type) {
  switch (type) {
    case GemmType::kF32:
      return CUDA_R_32F;
    case GemmType::kBF16:
      return CUDA_R_16BF;
    case GemmType::kF16:
      return CUDA_R_16F;
  }
  throw std::invalid_argument("unknown GEMM type");
}

}  // namespace

void validateGemm(const GemmShape& s) {
  if (s.batch < 1) throw std::invalid_argument(fmt::format("GEMM batch must be at least 1, got {}", s.batch));
  expectInt(s.m, "m");
  expectInt(s.n, "n");
  expectInt(s.k, "k");
  expectInt(s.batch, "batch");
  // The rows of a batch folded into one GEMM (see run) must fit too.
  if (s.sharedB && !s.transA) expectInt(s.batch * s.m, "batch x m");
}

Gemm::Gemm(CUstream_st* stream) {
  MESHFLOW_CUBLAS_CHECK(cublasCreate(&handle_));
  MESHFLOW_CUBLAS_CHECK(cublasSetStream(handle_, stream));
}

Gemm::~Gemm() { cublasDestroy(handle_); }

// cuBLAS is column-major: a row-major [r, c] matrix is its column-major
// transpose. So row-major y = a·b is column-major yᵀ = bᵀ·aᵀ: b comes first, a
// second, each with the transpose flag the row-major caller gave, and the
// leading dimensions are the row-major row lengths.
void Gemm::run(const GemmShape& shape, GemmType type, GemmType output, const void* a, const void* b, void* y) {
  validateGemm(shape);
  if (output != type && output != GemmType::kF32)
    throw std::invalid_argument("GEMM output must be of the operands' type or f32");
  GemmShape s = shape;
  if (s.m == 0 || s.n == 0) return;
  if (s.sharedB && !s.transA) {  // a's matrices fold into the rows of one GEMM
    s.m *= s.batch;
    s.batch = 1;
  }
  if (s.k == 0) {  // cuBLAS wants leading dimensions of at least 1; y is zeros
    cudaStream_t stream = nullptr;
    MESHFLOW_CUBLAS_CHECK(cublasGetStream(handle_, &stream));
    const std::size_t bytes = output == GemmType::kF32 ? 4 : 2;
    MESHFLOW_CUDA_CHECK(cudaMemsetAsync(y, 0, bytes * s.batch * s.m * s.n, stream));
    return;
  }
  const cudaDataType_t t = dataType(type), ty = dataType(output);
  const float alpha = 1.0f, beta = 0.0f;  // beta 0 also writes y when k is 0
  const int m = static_cast<int>(s.m), n = static_cast<int>(s.n), k = static_cast<int>(s.k);
  MESHFLOW_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle_, s.transB ? CUBLAS_OP_T : CUBLAS_OP_N, s.transA ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
      t, s.transB ? k : n, s.sharedB ? 0 : static_cast<long long>(s.k) * s.n, a, t, s.transA ? m : k,
      static_cast<long long>(s.m) * s.k, &beta, y, ty, n, static_cast<long long>(s.m) * s.n,
      static_cast<int>(s.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace meshflow::runtime::cuda
