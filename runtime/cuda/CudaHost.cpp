#include "runtime/cuda/CudaHost.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/CudaReports.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceMapping.h"
#include "runtime/cuda/DeviceProbe.h"
#include "runtime/cuda/GpuProcessHost.h"

namespace meshflow::runtime::cuda {

bool managedMemoryRequested(const char* setting) {
  const std::string value = setting ? setting : "";
  if (value.empty() || value == "managed") return true;
  if (value == "device") return false;
  throw CudaError(fmt::format("MESHFLOW_CUDA_MEMORY is '{}': it must be 'managed' (the default) or 'device'", value));
}

CudaHost::CudaHost(const GpuHostRequest& request) : managed_(managedMemoryRequested(std::getenv("MESHFLOW_CUDA_MEMORY"))) {
  requireDevice(0);
  gpu_ = gpuOfDevices(request.devices, deviceCount());
  if (managed_)
    for (int gpu : gpu_) requireConcurrentManagedAccess(gpu);
  for (int gpu : gpu_) kernels_.push_back(std::make_unique<CudaKernels>(gpu));
  cluster_ = std::make_unique<cpu::LocalCluster>(cpu::LocalClusterOptions{request.devices, request.timeout, 0});
}

CudaHost::~CudaHost() {
  std::vector<std::pair<int, const CudaKernels*>> devices;
  for (std::size_t d = 0; d < kernels_.size(); ++d) devices.emplace_back(static_cast<int>(d), kernels_[d].get());
  reportDevices(devices);
}

void CudaHost::run(const std::function<void(int device)>& body) {
  cluster_->run([&](int device) {
    CudaKernels& kernels = *kernels_.at(static_cast<std::size_t>(device));
    MESHFLOW_CUDA_CHECK(cudaSetDevice(kernels.gpu()));
    KernelScope scope(&kernels);
    body(device);
  });
}

std::shared_ptr<DeviceMemory> CudaHost::makeMemory(int device, std::int64_t limit) {
  return makeDeviceMemory(device, gpu_.at(static_cast<std::size_t>(device)), limit, managed_);
}

void installCudaBackend() {
  installGpuHosts([](const GpuHostRequest& request) -> std::unique_ptr<DeviceHost> {
    if (request.process) return std::make_unique<GpuProcessHost>(request);
    return std::make_unique<CudaHost>(request);
  });
}

}  // namespace meshflow::runtime::cuda
