#include "runtime/cuda/CudaHost.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceMapping.h"
#include "runtime/cuda/DeviceProbe.h"

namespace meshflow::runtime::cuda {
namespace {

// The host reads and writes the devices' managed tensors between kernels
// (ops without a CUDA kernel, the executor's sums, the communicator), while
// other devices' kernels run on the same GPU.
void requireConcurrentManagedAccess(int gpu) {
  int concurrent = 0;
  MESHFLOW_CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, gpu));
  if (!concurrent)
    throw CudaError(fmt::format("CUDA device {} ({}) cannot share managed memory with the host while it computes "
                                "(concurrentManagedAccess is 0); the cuda backend needs Linux and a Pascal or later GPU",
                                gpu, deviceInfo(gpu).name));
}

// "device 0: 1234 ops on the GPU, 56 on the host (reshape 40, constant 16);
// fused: fused_bias_gelu 2, fused_softmax 2" (a fused group counts as one op).
std::string opsSummary(int device, const CudaKernels& kernels) {
  std::int64_t onGpu = 0, onHost = 0;
  std::string fused;
  for (const auto& [name, count] : kernels.gpuOps()) {
    onGpu += count;
    if (name.starts_with("fused_")) fused += fmt::format("{}{} {}", fused.empty() ? "" : ", ", name, count);
  }
  std::string hostKinds;
  for (const auto& [name, count] : kernels.hostOps()) {
    onHost += count;
    hostKinds += fmt::format("{}{} {}", hostKinds.empty() ? "" : ", ", name, count);
  }
  return fmt::format("meshflow: cuda device {} (GPU {}): {} ops on the GPU, {} on the host{}{}", device,
                     kernels.gpu(), onGpu, onHost, hostKinds.empty() ? "" : " (" + hostKinds + ")",
                     fused.empty() ? "" : "; fused: " + fused);
}

// "device 0 time by op kind (each op waited for): matmul 1.23 s (40%, 480 ops), ..." — the ten largest.
std::string timeSummary(int device, const CudaKernels& kernels) {
  struct Kind {
    std::string name;
    double seconds;
    std::int64_t ops;
  };
  std::vector<Kind> kinds;
  double total = 0;
  const auto add = [&](const auto& seconds, const auto& counts, const char* where) {
    for (const auto& [name, s] : seconds) {
      kinds.push_back({name + where, s, counts.count(name) ? counts.at(name) : 0});
      total += s;
    }
  };
  add(kernels.gpuSeconds(), kernels.gpuOps(), "");
  add(kernels.hostSeconds(), kernels.hostOps(), " (host)");
  std::sort(kinds.begin(), kinds.end(), [](const Kind& a, const Kind& b) {
    return a.seconds != b.seconds ? a.seconds > b.seconds : a.name < b.name;
  });
  std::string text;
  for (std::size_t i = 0; i < kinds.size() && i < 10; ++i)
    text += fmt::format("{}{} {:.3f} s ({:.0f}%, {} ops)", i ? ", " : "", kinds[i].name, kinds[i].seconds,
                        total > 0 ? 100 * kinds[i].seconds / total : 0.0, kinds[i].ops);
  return fmt::format("meshflow: cuda device {} time by op kind, each op waited for ({:.3f} s in all): {}", device,
                     total, text);
}

}  // namespace

bool managedMemoryRequested(const char* setting) {
  const std::string value = setting ? setting : "";
  if (value.empty() || value == "managed") return true;
  if (value == "device") return false;
  throw CudaError(fmt::format("MESHFLOW_CUDA_MEMORY is '{}': it must be 'managed' (the default) or 'device'", value));
}

CudaHost::CudaHost(const GpuHostRequest& request) : managed_(managedMemoryRequested(std::getenv("MESHFLOW_CUDA_MEMORY"))) {
  requireDevice(0);
  gpu_ = gpuOfDevices(request.devices, deviceCount());
  if (managed_)
    for (int gpu : gpu_) requireConcurrentManagedAccess(gpu);
  for (int gpu : gpu_) kernels_.push_back(std::make_unique<CudaKernels>(gpu));
  cluster_ = std::make_unique<cpu::LocalCluster>(cpu::LocalClusterOptions{request.devices, request.timeout, 0});
}

CudaHost::~CudaHost() {
  if (const char* report = std::getenv("MESHFLOW_CUDA_OPS"); report && *report && std::string(report) != "0")
    for (std::size_t d = 0; d < kernels_.size(); ++d)
      std::fprintf(stderr, "%s\n", opsSummary(static_cast<int>(d), *kernels_[d]).c_str());
  for (std::size_t d = 0; d < kernels_.size(); ++d)
    if (kernels_[d]->profiling())
      std::fprintf(stderr, "%s\n", timeSummary(static_cast<int>(d), *kernels_[d]).c_str());
}

void CudaHost::run(const std::function<void(int device)>& body) {
  cluster_->run([&](int device) {
    CudaKernels& kernels = *kernels_.at(static_cast<std::size_t>(device));
    MESHFLOW_CUDA_CHECK(cudaSetDevice(kernels.gpu()));
    KernelScope scope(&kernels);
    body(device);
  });
}

std::shared_ptr<DeviceMemory> CudaHost::makeMemory(int device, std::int64_t limit) {
  return makeDeviceMemory(device, gpu_.at(static_cast<std::size_t>(device)), limit, managed_);
}

void installCudaBackend() {
  installGpuHosts([](const GpuHostRequest& request) { return std::make_unique<CudaHost>(request); });
}

}  // namespace meshflow::runtime::cuda
