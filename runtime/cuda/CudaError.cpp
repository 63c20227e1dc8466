#include "runtime/cuda/CudaError.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace meshflow::runtime::cuda {

void checkCuda(int status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  auto error = static_cast<cudaError_t>(status);
  // Clears the error a launch left, so that the next call does not report it again.
  (void)cudaGetLastError();
  throw CudaError(fmt::format("CUDA error {} ({}) in {} at {}:{}", cudaGetErrorName(error),
                              cudaGetErrorString(error), call, file, line));
}

void checkCublas(int status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  auto error = static_cast<cublasStatus_t>(status);
  throw CudaError(fmt::format("cuBLAS error {} ({}) in {} at {}:{}", cublasGetStatusName(error),
                              cublasGetStatusString(error), call, file, line));
}

}  // namespace meshflow::runtime::cuda
