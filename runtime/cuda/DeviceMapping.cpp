#include "runtime/cuda/DeviceMapping.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace meshflow::runtime::cuda {

std::vector<int> gpuOfDevices(int devices, int gpus) {
  if (devices < 1) throw std::invalid_argument(fmt::format("the cuda backend needs at least one device, got {}", devices));
  if (gpus < 1) throw std::invalid_argument(fmt::format("the cuda backend needs at least one GPU, got {}", gpus));
  const int used = std::min(devices, gpus);
  std::vector<int> gpu(static_cast<std::size_t>(devices));
  for (int d = 0; d < devices; ++d)
    gpu[static_cast<std::size_t>(d)] = static_cast<int>(static_cast<long long>(d) * used / devices);
  return gpu;
}

int gpuOfLocalRank(int localRank, int gpus) {
  if (localRank < 0) throw std::invalid_argument(fmt::format("a process's local rank is {}: it must be 0 or more", localRank));
  if (gpus < 1) throw std::invalid_argument(fmt::format("the cuda backend needs at least one GPU, got {}", gpus));
  return localRank % gpus;
}

}  // namespace meshflow::runtime::cuda
