#include "runtime/cuda/GpuProcessHost.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <vector>

#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/CudaHost.h"
#include "runtime/cuda/CudaReports.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceMapping.h"
#include "runtime/cuda/DeviceProbe.h"

namespace meshflow::runtime::cuda {

GpuProcessHost::GpuProcessHost(const GpuHostRequest& request)
    : process_(request.process), managed_(managedMemoryRequested(std::getenv("MESHFLOW_CUDA_MEMORY"))) {
  if (!process_) throw std::invalid_argument("GpuProcessHost needs the job's host for this process");
  requireDevice(0);
  gpu_ = gpuOfLocalRank(request.localRank, deviceCount());
  if (managed_) requireConcurrentManagedAccess(gpu_);
  for (int d = 0; d < request.devices; ++d)
    if (process_->runsHere(d)) kernels_.emplace(d, std::make_unique<CudaKernels>(gpu_));
}

GpuProcessHost::~GpuProcessHost() {
  std::vector<std::pair<int, const CudaKernels*>> devices;
  for (const auto& [device, kernels] : kernels_) devices.emplace_back(device, kernels.get());
  reportDevices(devices);
}

void GpuProcessHost::run(const std::function<void(int device)>& body) {
  process_->run([&](int device) {
    CudaKernels& kernels = *kernels_.at(device);
    MESHFLOW_CUDA_CHECK(cudaSetDevice(gpu_));
    KernelScope scope(&kernels);
    body(device);
  });
}

std::shared_ptr<DeviceMemory> GpuProcessHost::makeMemory(int device, std::int64_t limit) {
  return makeDeviceMemory(device, gpu_, limit, managed_);
}

}  // namespace meshflow::runtime::cuda
