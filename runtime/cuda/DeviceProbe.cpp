#include "runtime/cuda/DeviceProbe.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "runtime/cuda/CudaError.h"

namespace meshflow::runtime::cuda {
namespace {

// cudaGetDeviceCount reports a missing driver or GPU as an error, never a crash.
cudaError_t countDevices(int& count) {
  count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    count = 0;
  }
  return status;
}

}  // namespace

int deviceCount() {
  int count = 0;
  countDevices(count);
  return count;
}

std::string noDeviceReason() {
  int count = 0;
  cudaError_t status = countDevices(count);
  if (count > 0) return "";
  if (status == cudaSuccess) return "the CUDA driver reports no device";
  return fmt::format("{}: {}", cudaGetErrorName(status), cudaGetErrorString(status));
}

DeviceInfo deviceInfo(int index) {
  requireDevice(index);
  cudaDeviceProp props{};
  MESHFLOW_CUDA_CHECK(cudaGetDeviceProperties(&props, index));
  return {props.name, props.major, props.minor, static_cast<std::int64_t>(props.totalGlobalMem),
          props.multiProcessorCount};
}

void requireDevice(int index) {
  int count = deviceCount();
  if (count == 0)
    throw CudaError(fmt::format("no CUDA device is available ({}); the cuda backend needs an NVIDIA GPU "
                                "and its driver — use --backend cpu or mpi on this machine",
                                noDeviceReason()));
  if (index < 0 || index >= count)
    throw CudaError(fmt::format("CUDA device {} does not exist: this machine has {} (0 to {})", index, count,
                                count - 1));
}

void requireConcurrentManagedAccess(int index) {
  int concurrent = 0;
  MESHFLOW_CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, index));
  if (!concurrent)
    throw CudaError(fmt::format("CUDA device {} ({}) cannot share managed memory with the host while it computes "
                                "(concurrentManagedAccess is 0); the cuda backend needs Linux and a Pascal or later GPU",
                                index, deviceInfo(index).name));
}

}  // namespace meshflow::runtime::cuda
