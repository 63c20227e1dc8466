#include "runtime/GpuHosts.h"

#include <mutex>

namespace meshflow::runtime {
namespace {

std::mutex factoryMutex;
GpuHostFactory& installedFactory() {
  static GpuHostFactory factory;
  return factory;
}

}  // namespace

void installGpuHosts(GpuHostFactory factory) {
  std::lock_guard lock(factoryMutex);
  installedFactory() = std::move(factory);
}

bool gpuHostsInstalled() {
  std::lock_guard lock(factoryMutex);
  return static_cast<bool>(installedFactory());
}

std::unique_ptr<DeviceHost> makeGpuHost(const GpuHostRequest& request) {
  GpuHostFactory factory;
  {
    std::lock_guard lock(factoryMutex);
    factory = installedFactory();
  }
  if (!factory)
    throw GpuUnavailable(
        "no CUDA backend is available here: it comes with the meshflow executable of a build with CUDA "
        "(-DMESHFLOW_CUDA=ON and the CUDA toolkit at build time) and needs an NVIDIA GPU to run; train on cpu(...) "
        "clusters, or use --backend cpu or mpi");
  try {
    return factory(request);
  } catch (const GpuUnavailable&) {
    throw;
  } catch (const std::exception& e) {
    throw GpuUnavailable(e.what());
  }
}

}  // namespace meshflow::runtime
