// The seam between train() and the cuda backend: the interpreter asks for a
// DeviceHost whose devices run on GPUs without linking the cuda backend;
// whatever links it (the meshflow executable, repl/Backends.cpp) installs its
// factory first (runtime/cuda/CudaHost.h: installCudaBackend).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>

#include "runtime/parallel/DeviceHost.h"

namespace meshflow::runtime {

struct GpuHostRequest {
  GpuHostRequest(int devices = 1, std::chrono::milliseconds timeout = std::chrono::milliseconds(60000))
      : devices(devices), timeout(timeout) {}
  int devices;                        ///< Virtual devices.
  std::chrono::milliseconds timeout;  ///< Longest wait for a message or collective.
  /// A process of a job (the mpi backend: ProcessGroup::deviceHost): its
  /// devices then run on a GPU of this machine chosen by `localRank`, and
  /// keep this host's messages and collectives. Null: all `devices` run on
  /// threads of this process.
  std::shared_ptr<DeviceHost> process;
  int localRank = 0;  ///< The process's rank among the job's on this machine.
  /// With `process`: whether the job has stopped (another process failed),
  /// asked on the thread that runs the process's device while it waits
  /// outside the job's transport (NCCL), so that the wait ends at once.
  std::function<bool()> stopped;
};

using GpuHostFactory = std::function<std::unique_ptr<DeviceHost>(const GpuHostRequest&)>;

/// A GPU backend cannot run here: none in this build, or no GPU.
class GpuUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Installs the factory makeGpuHost uses (process-wide; the last one wins).
void installGpuHosts(GpuHostFactory factory);
/// Whether a factory is installed.
bool gpuHostsInstalled();
/// A host for `request`: throws GpuUnavailable when no factory is installed
/// ("no CUDA backend is available here ..."), or what the factory
/// throws (the cuda backend: no GPU, no driver) as GpuUnavailable.
std::unique_ptr<DeviceHost> makeGpuHost(const GpuHostRequest& request);

}  // namespace meshflow::runtime
