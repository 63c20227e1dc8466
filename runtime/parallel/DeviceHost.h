// runtime::DeviceHost — where a trainer's devices run: every device on a thread
// of this process (the cpu backend's cpu::LocalCluster) or one device in each
// process of a job (the mpi backend, runtime/mpi/). ParallelTrainer runs the
// devices a host says are here and leaves the rest to the other processes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "runtime/Communicator.h"
#include "runtime/memory/DeviceMemory.h"

namespace meshflow::runtime {

namespace cpu {
class CoreGate;
}

class DeviceHost {
 public:
  virtual ~DeviceHost() = default;
  /// Whether `device` runs in this process.
  virtual bool runsHere(int device) const = 0;
  /// `device`'s endpoint; only for a device that runs here.
  virtual Communicator& communicator(int device) = 0;
  /// The host cores the devices here take turns on; null when they take none.
  virtual cpu::CoreGate* cores() = 0;
  /// Runs body(device) for every device here and returns when all have. When
  /// one throws, the others' waits end at once (as do those of the devices
  /// in other processes), and the first failure is rethrown as
  /// cpu::DeviceFailure (runtime/cpu/LocalCluster.h).
  virtual void run(const std::function<void(int device)>& body) = 0;
  /// The memory `device`'s tensors come from, `limit` bytes (0: unlimited):
  /// host memory, unless the host's devices keep their tensors elsewhere (the
  /// cuda backend: GPU memory, runtime/cuda/CudaHost.h).
  virtual std::shared_ptr<DeviceMemory> makeMemory(int device, std::int64_t limit) {
    return std::make_shared<DeviceMemory>(device, limit);
  }
  /// Whether its devices' kernels run a fused attention (ParallelPlan::
  /// fusedAttention) where they keep their tensors. The cuda backend has no
  /// such kernel yet: it runs attention op by op rather than on the host.
  virtual bool fusesAttention() const { return true; }
};

}  // namespace meshflow::runtime
