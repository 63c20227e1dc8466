// The cuda backend's one error type, and the checks that turn a CUDA runtime
// or cuBLAS status into it with the call and the place that failed.
#pragma once

#include <stdexcept>
#include <string>

namespace meshflow::runtime::cuda {

/// A CUDA runtime, cuBLAS or NCCL call failed, or the cuda backend cannot run
/// here (no GPU, no driver). what() names the call and the reason.
class CudaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws CudaError for a status other than success. `status` is a
/// cudaError_t or cublasStatus_t as int, so that this header needs no CUDA one.
void checkCuda(int status, const char* call, const char* file, int line);
void checkCublas(int status, const char* call, const char* file, int line);

}  // namespace meshflow::runtime::cuda

#define MESHFLOW_CUDA_CHECK(call) \
  ::meshflow::runtime::cuda::checkCuda(static_cast<int>(call), #call, __FILE__, __LINE__)
#define MESHFLOW_CUBLAS_CHECK(call) \
  ::meshflow::runtime::cuda::checkCublas(static_cast<int>(call), #call, __FILE__, __LINE__)
