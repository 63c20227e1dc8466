#include "runtime/mpi/LaunchEnvironment.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <vector>

namespace meshflow::runtime::mpi {
namespace {

// The variables one launcher sets. `rank` marks the launcher as present;
// `size` must then be set too; the local ranks are optional, tried in order.
struct Launcher {
  const char* name;
  const char* rank;
  const char* size;
  std::vector<const char*> localRanks;
};

// Open MPI first: mpirun inside a Slurm allocation sets both its own and
// Slurm's variables, and its own are the ones of this job. PMI before Slurm
// for the same reason (srun --mpi=pmi2 sets both, and they agree).
const std::vector<Launcher>& launchers() {
  static const std::vector<Launcher> all = {
      {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", {"OMPI_COMM_WORLD_LOCAL_RANK"}},
      {"PMI", "PMI_RANK", "PMI_SIZE", {"MPI_LOCALRANKID", "PMI_LOCAL_RANK"}},
      {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", {"SLURM_LOCALID"}},
      {"RANK/WORLD_SIZE", "RANK", "WORLD_SIZE", {"LOCAL_RANK"}},
  };
  return all;
}

// The value of `name` as a whole number >= `least`: decimal digits only.
int parseCount(const char* name, const std::string& value, int least, const char* what) {
  int parsed = 0;
  const char* end = value.data() + value.size();
  auto [stop, error] = std::from_chars(value.data(), end, parsed);
  if (value.empty() || value[0] == '-' || value[0] == '+' || error != std::errc() || stop != end ||
      parsed < least)
    throw LaunchError(fmt::format("{}={} is not {} (a whole number >= {})", name,
                                  value.empty() ? "\"\"" : value, what, least));
  return parsed;
}

LaunchInfo fromLauncher(const Launcher& launcher, const EnvironmentLookup& env) {
  std::optional<std::string> rank = env(launcher.rank);
  std::optional<std::string> size = env(launcher.size);
  if (!size)
    throw LaunchError(fmt::format("{}={} is set but {} is not: the world size is unknown",
                                  launcher.rank, *rank, launcher.size));
  LaunchInfo info;
  info.launcher = launcher.name;
  info.rank = parseCount(launcher.rank, *rank, 0, "a rank");
  info.worldSize = parseCount(launcher.size, *size, 1, "a world size");
  if (info.rank >= info.worldSize)
    throw LaunchError(fmt::format("{}={} is outside the world of {}={} (ranks 0 to {})",
                                  launcher.rank, info.rank, launcher.size, info.worldSize,
                                  info.worldSize - 1));
  for (const char* name : launcher.localRanks) {
    std::optional<std::string> local = env(name);
    if (!local) continue;
    info.localRank = parseCount(name, *local, 0, "a local rank");
    if (info.localRank >= info.worldSize)
      throw LaunchError(fmt::format("{}={} is outside the world of {}={}", name, info.localRank,
                                    launcher.size, info.worldSize));
    break;
  }
  return info;
}

}  // namespace

LaunchInfo launchInfoFrom(const EnvironmentLookup& env) {
  for (const Launcher& launcher : launchers())
    if (env(launcher.rank)) return fromLauncher(launcher, env);
  // A size without a rank is a launch we cannot place this process in (the
  // Slurm batch shell, with SLURM_NTASKS but no SLURM_PROCID, is not one:
  // it is no rank at all, and is taken as a process on its own).
  for (const Launcher& launcher : launchers()) {
    if (std::string(launcher.name) == "Slurm") continue;
    if (auto size = env(launcher.size))
      throw LaunchError(fmt::format("{}={} is set but {} is not: this process's rank is unknown",
                                    launcher.size, *size, launcher.rank));
  }
  return LaunchInfo{};
}

LaunchInfo launchInfo() {
  return launchInfoFrom([](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (!value) return std::nullopt;
    return std::string(value);
  });
}

}  // namespace meshflow::runtime::mpi
