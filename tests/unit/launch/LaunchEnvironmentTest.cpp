// Which rank a process is, from the variables of each launcher: mpirun,
// PMI (MPICH, Intel MPI, srun --mpi=pmi2), Slurm's srun, and torchrun-style
// RANK / WORLD_SIZE. No MPI is needed: the lookups are maps.
#include <catch2/catch.hpp>
#include <map>

#include "runtime/mpi/LaunchEnvironment.h"

using meshflow::runtime::mpi::LaunchError;
using meshflow::runtime::mpi::LaunchInfo;
using meshflow::runtime::mpi::launchInfoFrom;

namespace {

using Variables = std::map<std::string, std::string>;

LaunchInfo launch(const Variables& variables) {
  return launchInfoFrom([&](const std::string& name) -> std::optional<std::string> {
    auto found = variables.find(name);
    if (found == variables.end()) return std::nullopt;
    return found->second;
  });
}

std::string failure(const Variables& variables) {
  try {
    launch(variables);
  } catch (const LaunchError& e) {
    return e.what();
  }
  return "no error";
}

void requireLaunch(const LaunchInfo& info, int rank, int worldSize, int localRank,
                   const std::string& launcher) {
  CHECK(info.rank == rank);
  CHECK(info.worldSize == worldSize);
  CHECK(info.localRank == localRank);
  CHECK(info.launcher == launcher);
}

}  // namespace

TEST_CASE("a process started on its own is rank 0 of 1", "[launch]") {
  requireLaunch(launch({}), 0, 1, 0, "none");
  // Unrelated variables, and a Slurm batch script's own shell (an allocation
  // of tasks, but no task id: srun sets SLURM_PROCID only for its tasks).
  requireLaunch(launch({{"HOME", "/root"}, {"SLURM_NTASKS", "8"}, {"SLURM_JOB_ID", "17"}}), 0, 1, 0,
                "none");
}

TEST_CASE("Open MPI's mpirun variables", "[launch]") {
  requireLaunch(launch({{"OMPI_COMM_WORLD_RANK", "3"},
                        {"OMPI_COMM_WORLD_SIZE", "8"},
                        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}}),
                3, 8, 1, "Open MPI");
  // Without a local rank: one process per node.
  requireLaunch(launch({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}}), 0, 1, 0,
                "Open MPI");
}

TEST_CASE("PMI variables, with either local-rank variable", "[launch]") {
  requireLaunch(launch({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}}), 5, 6, 0, "PMI");
  requireLaunch(launch({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}, {"MPI_LOCALRANKID", "2"}}), 5, 6, 2,
                "PMI");
  requireLaunch(launch({{"PMI_RANK", "5"}, {"PMI_SIZE", "6"}, {"PMI_LOCAL_RANK", "1"}}), 5, 6, 1,
                "PMI");
}

TEST_CASE("Slurm's srun variables", "[launch]") {
  requireLaunch(launch({{"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "3"}}), 7,
                16, 3, "Slurm");
  requireLaunch(launch({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}), 0, 2, 0, "Slurm");
}

TEST_CASE("RANK, WORLD_SIZE and LOCAL_RANK", "[launch]") {
  requireLaunch(launch({{"RANK", "2"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}}), 2, 4, 0,
                "RANK/WORLD_SIZE");
  requireLaunch(launch({{"RANK", "1"}, {"WORLD_SIZE", "2"}}), 1, 2, 0, "RANK/WORLD_SIZE");
}

TEST_CASE("the launcher that started the process comes first", "[launch]") {
  // mpirun inside a Slurm allocation: both sets, mpirun's are this job's.
  requireLaunch(launch({{"OMPI_COMM_WORLD_RANK", "1"},
                        {"OMPI_COMM_WORLD_SIZE", "4"},
                        {"SLURM_PROCID", "0"},
                        {"SLURM_NTASKS", "1"},
                        {"RANK", "9"},
                        {"WORLD_SIZE", "10"}}),
                1, 4, 0, "Open MPI");
  requireLaunch(
      launch({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "3"}}),
      2, 3, 0, "PMI");
  requireLaunch(
      launch({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"RANK", "0"}, {"WORLD_SIZE", "1"}}), 1,
      2, 0, "Slurm");
}

TEST_CASE("values that do not parse name the variable and the value", "[launch]") {
  CHECK(failure({{"OMPI_COMM_WORLD_RANK", "abc"}, {"OMPI_COMM_WORLD_SIZE", "4"}}) ==
        "OMPI_COMM_WORLD_RANK=abc is not a rank (a whole number >= 0)");
  CHECK(failure({{"PMI_RANK", "1"}, {"PMI_SIZE", "0"}}) ==
        "PMI_SIZE=0 is not a world size (a whole number >= 1)");
  CHECK(failure({{"SLURM_PROCID", "-1"}, {"SLURM_NTASKS", "4"}}) ==
        "SLURM_PROCID=-1 is not a rank (a whole number >= 0)");
  CHECK(failure({{"RANK", "1"}, {"WORLD_SIZE", "4x"}}) ==
        "WORLD_SIZE=4x is not a world size (a whole number >= 1)");
  CHECK(failure({{"RANK", " 1"}, {"WORLD_SIZE", "4"}}) ==
        "RANK= 1 is not a rank (a whole number >= 0)");
  CHECK(failure({{"RANK", ""}, {"WORLD_SIZE", "4"}}) ==
        "RANK=\"\" is not a rank (a whole number >= 0)");
  CHECK(failure({{"RANK", "99999999999"}, {"WORLD_SIZE", "4"}}) ==
        "RANK=99999999999 is not a rank (a whole number >= 0)");
  CHECK(failure({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "first"}}) ==
        "LOCAL_RANK=first is not a local rank (a whole number >= 0)");
  CHECK(failure({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "+1"}}) ==
        "MPI_LOCALRANKID=+1 is not a local rank (a whole number >= 0)");
}

TEST_CASE("values that disagree name the variables", "[launch]") {
  CHECK(failure({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}) ==
        "OMPI_COMM_WORLD_RANK=4 is outside the world of OMPI_COMM_WORLD_SIZE=4 (ranks 0 to 3)");
  CHECK(failure({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}}) ==
        "SLURM_PROCID=2 is outside the world of SLURM_NTASKS=2 (ranks 0 to 1)");
  CHECK(failure({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "2"}}) ==
        "SLURM_LOCALID=2 is outside the world of SLURM_NTASKS=2");
  CHECK(failure({{"OMPI_COMM_WORLD_RANK", "1"}}) ==
        "OMPI_COMM_WORLD_RANK=1 is set but OMPI_COMM_WORLD_SIZE is not: the world size is unknown");
  CHECK(failure({{"SLURM_PROCID", "1"}}) ==
        "SLURM_PROCID=1 is set but SLURM_NTASKS is not: the world size is unknown");
  CHECK(failure({{"WORLD_SIZE", "4"}}) ==
        "WORLD_SIZE=4 is set but RANK is not: this process's rank is unknown");
  CHECK(failure({{"PMI_SIZE", "2"}}) ==
        "PMI_SIZE=2 is set but PMI_RANK is not: this process's rank is unknown");
}

TEST_CASE("launchInfo reads this process's environment", "[launch]") {
  // ctest runs this executable on its own (not under mpirun).
  LaunchInfo info = meshflow::runtime::mpi::launchInfo();
  CHECK(info.rank < info.worldSize);
}
