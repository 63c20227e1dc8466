// Which GPUs this process can use. Every function here is safe to call on a
// machine with no GPU and no driver: the probe answers 0 devices and says why.
#pragma once

#include <cstdint>
#include <string>

namespace meshflow::runtime::cuda {

struct DeviceInfo {
  std::string name;               ///< "NVIDIA H100 80GB HBM3"
  int computeMajor = 0, computeMinor = 0;
  std::int64_t totalMemory = 0;  ///< Bytes.
  int multiprocessors = 0;
};

/// The number of CUDA devices this process sees; 0 without a GPU or a driver.
int deviceCount();
/// Why deviceCount() is 0 ("CUDA driver version is insufficient ..."), or "".
std::string noDeviceReason();
/// The properties of device `index`; throws CudaError if it does not exist.
DeviceInfo deviceInfo(int index);
/// Throws CudaError, saying what is missing, unless device `index` exists:
/// the error `--backend cuda` gives on a machine without a GPU.
void requireDevice(int index = 0);
/// Throws CudaError unless GPU `index` can share managed memory with the host
/// while it computes (concurrentManagedAccess: Linux and a Pascal or later
/// GPU), which the cuda backend's managed tensors need: the host reads and
/// writes them between kernels while other devices' kernels run.
void requireConcurrentManagedAccess(int index);

}  // namespace meshflow::runtime::cuda
