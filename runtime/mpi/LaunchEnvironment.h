// Which process of a launched job this is: its rank, the world size and its
// rank on its node, read from the variables the launchers set (mpirun's
// OMPI_COMM_WORLD_*, PMI's PMI_*, Slurm's SLURM_*, or RANK / WORLD_SIZE /
// LOCAL_RANK). Needs no MPI library, so it is tested everywhere.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace meshflow::runtime::mpi {

/// The variables disagree or do not parse (`RANK=abc`, a rank outside the
/// world); what() names the variable and its value.
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LaunchInfo {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  /// Which variables gave them: "Open MPI", "PMI", "Slurm", "RANK/WORLD_SIZE",
  /// or "none" (a process started on its own: rank 0 of 1).
  std::string launcher = "none";
};

/// Looks a variable up; none when it is not set.
using EnvironmentLookup = std::function<std::optional<std::string>(const std::string&)>;

/// The launch of this process from `env`, trying Open MPI, then PMI, then
/// Slurm (SLURM_PROCID within SLURM_NTASKS; srun sets it only for a step,
/// so a batch script's own shell is not taken for a rank), then
/// RANK/WORLD_SIZE. A local rank missing is 0 (one process per node).
/// Throws LaunchError for values that do not parse or agree.
LaunchInfo launchInfoFrom(const EnvironmentLookup& env);

/// launchInfoFrom(getenv).
LaunchInfo launchInfo();

}  // namespace meshflow::runtime::mpi
