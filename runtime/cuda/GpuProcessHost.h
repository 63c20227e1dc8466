// The cuda backend in a process of a job (the mpi backend: one process per
// device, `mpirun -np N meshflow run --backend mpi` on a GPU cluster): the
// process's device on a GPU of its machine (gpuOfLocalRank), its tensors in
// that GPU's memory and its ops as CUDA kernels, as CudaHost runs a virtual
// device. Its collectives and messages go through NCCL (NcclCommunicator,
// with the job's communicator as its control channel) when the build has
// NCCL and every device has a GPU of its own (CommChoice.h; MESHFLOW_COMM
// overrides); else through the job's own transport (the mpi backend's,
// through host memory: the host reads and writes managed memory in place, or
// the host copies of device memory). When another process fails, the job's
// abort notice ends this process's NCCL waits at once (JobStop.h).
#pragma once

#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/GpuHosts.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/JobStop.h"

namespace meshflow::runtime::cuda {

class GpuProcessHost final : public DeviceHost {
 public:
  /// `request.process`: the job's host for this process. Throws CudaError at
  /// once when there is no GPU, or as CudaHost for the memory setting.
  explicit GpuProcessHost(const GpuHostRequest& request);
  ~GpuProcessHost() override;

  bool runsHere(int device) const override { return process_->runsHere(device); }
  Communicator& communicator(int device) override;
  cpu::CoreGate* cores() override { return nullptr; }
  /// body(device) through the job's host, with the GPU current and the
  /// device's kernels in a KernelScope.
  void run(const std::function<void(int device)>& body) override;
  std::shared_ptr<DeviceMemory> makeMemory(int device, std::int64_t limit) override;
  /// Attention runs as the fused kernels of AttentionKernels.h (a plan with
  /// fused_kernels = true), unless MESHFLOW_CUDA_FUSE=0: then op by op.
  bool fusesAttention() const override { return fusionRequested(); }

  int gpu() const { return gpu_; }
  bool usesNccl() const { return !nccl_.empty(); }

 private:
  std::shared_ptr<DeviceHost> process_;
  bool managed_;
  int gpu_;
  std::map<int, std::unique_ptr<CudaKernels>> kernels_;  // per device of this process
  std::map<int, std::unique_ptr<Communicator>> nccl_;    // per device, when NCCL was chosen
  /// The job's stop (request.stopped): ends this process's NCCL waits when
  /// another process failed, instead of the collective timeout.
  std::shared_ptr<JobStop> stop_;

  /// Gathers every device's GPU, chooses the transport and makes the NCCL
  /// communicators if it is NCCL.
  void chooseTransport(const GpuHostRequest& request);
};

}  // namespace meshflow::runtime::cuda
