#include "runtime/cuda/GpuProcessHost.h"

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/cuda/CommChoice.h"
#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/CudaHost.h"
#include "runtime/cuda/CudaReports.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceMapping.h"
#include "runtime/cuda/DeviceProbe.h"
#include "runtime/cuda/NcclCommunicator.h"

namespace meshflow::runtime::cuda {
namespace {

// This machine, as a number every process on it computes alike (a hash of
// its host name).
int machineId() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  std::uint32_t hash = 2166136261u;
  for (const char* c = name; *c; ++c) hash = (hash ^ static_cast<unsigned char>(*c)) * 16777619u;
  return static_cast<int>(hash & 0x7fffffff);
}

#if MESHFLOW_HAVE_NCCL
constexpr bool kNcclBuilt = true;
#else
constexpr bool kNcclBuilt = false;
#endif

}  // namespace

GpuProcessHost::GpuProcessHost(const GpuHostRequest& request)
    : process_(request.process),
      managed_(managedMemoryRequested(std::getenv("MESHFLOW_CUDA_MEMORY"))),
      stop_(std::make_shared<JobStop>(request.stopped)) {
  if (!process_)
    throw std::invalid_argument("GpuProcessHost needs the job's host for this process");
  requireDevice(0);
  gpu_ = gpuOfLocalRank(request.localRank, deviceCount());
  if (managed_) requireConcurrentManagedAccess(gpu_);
  for (int d = 0; d < request.devices; ++d)
    if (process_->runsHere(d)) kernels_.emplace(d, std::make_unique<CudaKernels>(gpu_));
  chooseTransport(request);
}

void GpuProcessHost::chooseTransport(const GpuHostRequest& request) {
  std::vector<int> everyone(static_cast<std::size_t>(request.devices));
  for (int d = 0; d < request.devices; ++d) everyone[static_cast<std::size_t>(d)] = d;
  std::map<int, Tensor> placements;  // per device here: every device's (machine, GPU)
  process_->run([&](int device) {
    Tensor mine = Tensor::fromI32({1, 2}, {machineId(), gpu_});
    process_->communicator(device).allGather(everyone, mine, placements[device]);
  });
  std::vector<std::pair<int, int>> gpus;
  auto words = placements.begin()->second.i32();
  for (std::size_t i = 0; i + 1 < words.size(); i += 2) gpus.emplace_back(words[i], words[i + 1]);
  const CommChoice choice = chooseCommTransport(std::getenv("MESHFLOW_COMM"), kNcclBuilt, gpus);
  for (const auto& [device, kernels] : kernels_) {
    reportTransport(device, choice.reason);
    if (choice.transport != CommTransport::Nccl) continue;
    NcclCommunicatorOptions options;
    options.calls = ncclCalls();
    options.stream = kernels->stream();
    options.timeout = request.timeout;
    options.stopped = [stop = stop_] { return (*stop)(); };
    options.prepareThread = [gpu = gpu_] { MESHFLOW_CUDA_CHECK(cudaSetDevice(gpu)); };
    nccl_.emplace(device, std::make_unique<NcclCommunicator>(process_->communicator(device),
                                                             std::move(options)));
  }
}

Communicator& GpuProcessHost::communicator(int device) {
  auto found = nccl_.find(device);
  return found != nccl_.end() ? *found->second : process_->communicator(device);
}

GpuProcessHost::~GpuProcessHost() {
  std::vector<std::pair<int, const CudaKernels*>> devices;
  for (const auto& [device, kernels] : kernels_) devices.emplace_back(device, kernels.get());
  reportDevices(devices);
}

void GpuProcessHost::run(const std::function<void(int device)>& body) {
  process_->run([&](int device) {
    stop_->pollOn(std::this_thread::get_id());
    CudaKernels& kernels = *kernels_.at(device);
    MESHFLOW_CUDA_CHECK(cudaSetDevice(gpu_));
    KernelScope scope(&kernels);
    body(device);
  });
}

std::shared_ptr<DeviceMemory> GpuProcessHost::makeMemory(int device, std::int64_t limit) {
  return makeDeviceMemory(device, gpu_, limit, managed_);
}

}  // namespace meshflow::runtime::cuda
