#include "runtime/cuda/CudaHost.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceMapping.h"
#include "runtime/cuda/DeviceProbe.h"

namespace meshflow::runtime::cuda {
namespace {

// The host reads and writes the devices' managed tensors between kernels
// (ops without a CUDA kernel, the executor's sums, the communicator), while
// other devices' kernels run on the same GPU.
void requireConcurrentManagedAccess(int gpu) {
  int concurrent = 0;
  MESHFLOW_CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, gpu));
  if (!concurrent)
    throw CudaError(fmt::format("CUDA device {} ({}) cannot share managed memory with the host while it computes "
                                "(concurrentManagedAccess is 0); the cuda backend needs Linux and a Pascal or later GPU",
                                gpu, deviceInfo(gpu).name));
}

}  // namespace

CudaHost::CudaHost(const GpuHostRequest& request) {
  requireDevice(0);
  gpu_ = gpuOfDevices(request.devices, deviceCount());
  for (int gpu : gpu_) requireConcurrentManagedAccess(gpu);
  for (int gpu : gpu_) kernels_.push_back(std::make_unique<CudaKernels>(gpu));
  cluster_ = std::make_unique<cpu::LocalCluster>(cpu::LocalClusterOptions{request.devices, request.timeout, 0});
}

CudaHost::~CudaHost() = default;

void CudaHost::run(const std::function<void(int device)>& body) {
  cluster_->run([&](int device) {
    CudaKernels& kernels = *kernels_.at(static_cast<std::size_t>(device));
    MESHFLOW_CUDA_CHECK(cudaSetDevice(kernels.gpu()));
    KernelScope scope(&kernels);
    body(device);
  });
}

std::shared_ptr<DeviceMemory> CudaHost::makeMemory(int device, std::int64_t limit) {
  return makeDeviceMemory(device, gpu_.at(static_cast<std::size_t>(device)), limit, true);
}

void installCudaBackend() {
  installGpuHosts([](const GpuHostRequest& request) { return std::make_unique<CudaHost>(request); });
}

}  // namespace meshflow::runtime::cuda
