// Which transport a GPU job's processes talk through (GpuProcessHost):
// NCCL, when this build has it and every process has a GPU of its own (NCCL
// refuses two ranks on one GPU), else the mpi transport through host memory.
// MESHFLOW_COMM=nccl|mpi|auto (unset or empty: auto) overrides the default;
// every process decides from the same facts, so all choose alike.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace meshflow::runtime::cuda {

enum class CommTransport { Nccl, Mpi };

struct CommChoice {
  CommTransport transport;
  std::string reason;  ///< "NCCL, one GPU per process", ...
};

/// `setting`: MESHFLOW_COMM's value (null: unset). `gpus`: one (machine id,
/// GPU number) per device of the job. Throws std::invalid_argument naming
/// MESHFLOW_COMM for an unknown value, or for `nccl` when NCCL cannot be had.
CommChoice chooseCommTransport(const char* setting, bool ncclBuilt,
                               const std::vector<std::pair<int, int>>& gpus);

}  // namespace meshflow::runtime::cuda
