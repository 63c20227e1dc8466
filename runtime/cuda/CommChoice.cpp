#include "runtime/cuda/CommChoice.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <stdexcept>

namespace meshflow::runtime::cuda {
namespace {

// Why NCCL cannot serve these GPUs, if it cannot.
std::optional<std::string> ncclObstacle(bool ncclBuilt,
                                        const std::vector<std::pair<int, int>>& gpus) {
  if (!ncclBuilt) return "this build of meshflow has no NCCL";
  std::set<std::pair<int, int>> seen;
  for (std::size_t d = 0; d < gpus.size(); ++d)
    if (!seen.insert(gpus[d]).second)
      return fmt::format(
          "devices share a GPU (device {} is on GPU {} with another), and NCCL refuses two ranks "
          "on one GPU",
          d, gpus[d].second);
  return std::nullopt;
}

}  // namespace

CommChoice chooseCommTransport(const char* setting, bool ncclBuilt,
                               const std::vector<std::pair<int, int>>& gpus) {
  const std::string value = setting ? setting : "";
  if (value != "" && value != "auto" && value != "nccl" && value != "mpi")
    throw std::invalid_argument(fmt::format(
        "MESHFLOW_COMM is '{}': it must be 'nccl', 'mpi' or 'auto' (the default)", value));
  if (value == "mpi") return {CommTransport::Mpi, "the mpi transport (MESHFLOW_COMM=mpi)"};
  const auto obstacle = ncclObstacle(ncclBuilt, gpus);
  if (!obstacle) return {CommTransport::Nccl, "NCCL, one GPU per device"};
  if (value == "nccl") throw std::invalid_argument("MESHFLOW_COMM is 'nccl' but " + *obstacle);
  return {CommTransport::Mpi, "the mpi transport: " + *obstacle};
}

}  // namespace meshflow::runtime::cuda
