// The cuda backend's DeviceHost: the virtual devices of a plan on this
// machine's GPUs (DeviceMapping.h), each on a thread of this process as the
// cpu backend runs them (cpu::LocalCluster, whose in-process communicator
// moves their tensors), with their tensors in their GPU's memory — CUDA
// managed memory, or with MESHFLOW_CUDA_MEMORY=device plain device memory
// whose host copies Tensor keeps (docs/cuda.md) — and their ops on the GPU (CudaKernels.h, one stream and cuBLAS handle a
// device). ParallelTrainer runs it unchanged: its executor calls
// runtime::runKernel, which the device threads' KernelScope sends here.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "runtime/GpuHosts.h"
#include "runtime/cpu/LocalCluster.h"
#include "runtime/cuda/CudaKernels.h"

namespace meshflow::runtime::cuda {

class CudaHost final : public DeviceHost {
 public:
  /// Throws CudaError at once when there is no GPU (cuda::requireDevice's
  /// message), MESHFLOW_CUDA_MEMORY is neither managed nor device, or managed
  /// memory is asked for and the GPU cannot share it with the host while it
  /// computes (concurrentManagedAccess, which Linux with a Pascal or later GPU has).
  explicit CudaHost(const GpuHostRequest& request);
  ~CudaHost() override;

  bool runsHere(int device) const override { return cluster_->runsHere(device); }
  Communicator& communicator(int device) override { return cluster_->communicator(device); }
  cpu::CoreGate* cores() override { return nullptr; }
  /// body(device) on every device's thread, with its GPU current and its
  /// kernels in a KernelScope.
  void run(const std::function<void(int device)>& body) override;
  /// Managed or device memory on the device's GPU (DeviceAllocator.h),
  /// `limit` bytes (0: the GPU's size).
  std::shared_ptr<DeviceMemory> makeMemory(int device, std::int64_t limit) override;
  /// Attention runs as the fused kernels of AttentionKernels.h (a plan with
  /// fused_kernels = true), unless MESHFLOW_CUDA_FUSE=0: then op by op.
  bool fusesAttention() const override { return fusionRequested(); }

  const std::vector<int>& gpus() const { return gpu_; }
  const CudaKernels& kernels(int device) const { return *kernels_.at(static_cast<std::size_t>(device)); }

 private:
  bool managed_;          // MESHFLOW_CUDA_MEMORY: managed (default) or device
  std::vector<int> gpu_;  // per device
  std::vector<std::unique_ptr<CudaKernels>> kernels_;
  std::unique_ptr<cpu::LocalCluster> cluster_;
};

/// MESHFLOW_CUDA_MEMORY's value (null: unset): true for managed memory (unset,
/// empty or "managed"), false for "device"; anything else throws CudaError.
bool managedMemoryRequested(const char* setting);

/// Installs the cuda backend as runtime::makeGpuHost's factory (GpuHosts.h):
/// CudaHost for a request of this process's threads, GpuProcessHost
/// (GpuProcessHost.h) for a process of a job.
void installCudaBackend();

}  // namespace meshflow::runtime::cuda
