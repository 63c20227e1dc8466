#include "repl/Backends.h"

#include <fmt/format.h>

#include "runtime/distributed/Worker.h"
#include "runtime/mpi/LaunchEnvironment.h"
#if MESHFLOW_HAVE_CUDA
#include "runtime/cuda/CudaHost.h"
#include "runtime/cuda/DeviceProbe.h"
#endif
#if MESHFLOW_HAVE_MPI
#include "runtime/mpi/MpiProcess.h"
#include "runtime/mpi/MpiProcessGroup.h"
#endif

namespace meshflow::cli {
namespace {

std::string firstError(const Status& status) {
  for (const Diagnostic& d : status.diagnostics)
    if (d.severity == Severity::Error) return d.message;
  return "the script failed";
}

#if MESHFLOW_HAVE_MPI
int runOnMpi(ScriptOptions& options, std::ostream& err, const std::function<Status(Config&)>& script) {
  runtime::mpi::MpiProcess process(nullptr, nullptr, {options.timeout, true});
  // The launcher's variables and MPI agree, or this rank says why not.
  int localRank = 0;
  try {
    runtime::mpi::LaunchInfo launch = runtime::mpi::launchInfo();
    localRank = launch.localRank;
    if (launch.launcher != "none" && (launch.rank != process.rank() || launch.worldSize != process.size()))
      throw runtime::mpi::LaunchError(fmt::format("{} says rank {} of {}, but MPI says rank {} of {}", launch.launcher,
                                                  launch.rank, launch.worldSize, process.rank(), process.size()));
  } catch (const runtime::mpi::LaunchError& e) {
    err << fmt::format("meshflow: rank {}: {}\n", process.rank(), e.what());
    return 1;
  }
  auto group = std::make_shared<runtime::mpi::MpiProcessGroup>(process, options.timeout, localRank);
  if (process.rank() != 0) return runtime::runWorker(*group, err);
  options.config.processes = group;
  Status status = script(options.config);
  runtime::releaseWorkers(*group, status.ok ? 0 : 1, status.ok ? std::string() : firstError(status));
  return status.ok ? 0 : 1;
}
#endif

}  // namespace

int runOnBackend(ScriptOptions& options, std::ostream& err, const std::function<Status(Config&)>& script) {
#if MESHFLOW_HAVE_CUDA
  // GPU clusters train on the cuda backend whatever the backend (BuiltinsTrain.cpp).
  runtime::cuda::installCudaBackend();
#endif
  if (options.backend == "cuda") {
#if MESHFLOW_HAVE_CUDA
    try {
      runtime::cuda::requireDevice(0);  // at once, before the script runs
    } catch (const std::exception& e) {
      err << "meshflow: --backend cuda: " << e.what() << "\n";
      return 1;
    }
    options.config.cuda = true;
    return script(options.config).ok ? 0 : 1;
#else
    err << "meshflow: --backend cuda: this build of meshflow has no CUDA backend (it needs the CUDA toolkit, "
           "cuBLAS and NCCL at build time, -DMESHFLOW_CUDA=ON, and an NVIDIA GPU to run); use --backend cpu or mpi\n";
    return 1;
#endif
  }
  if (options.backend == "mpi") {
#if MESHFLOW_HAVE_MPI
    return runOnMpi(options, err, script);
#else
    err << "meshflow: --backend mpi: this build of meshflow has no MPI backend (install Open MPI, Debian's "
           "libopenmpi-dev and openmpi-bin, and rebuild)\n";
    return 1;
#endif
  }
  return script(options.config).ok ? 0 : 1;
}

}  // namespace meshflow::cli
