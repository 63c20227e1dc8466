// NcclCommunicator against real NCCL on the one GPU the check machine has: a
// one-rank communicator, so every call goes through NCCL (ncclAllReduce,
// ncclAllGather, ncclReduceScatter, ncclBroadcast, grouped ncclSend/ncclRecv
// to itself for all-to-all) and must hand each tensor back unchanged, in
// managed and in plain device memory; plus a message to itself and a
// barrier. Without a GPU or without NCCL in the build it prints SKIPPED and
// exits 77. The unit tests (tests/unit/cuda/NcclCommunicatorTest.cpp) cover
// several ranks on a fake NCCL.
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceProbe.h"
#include "runtime/cuda/NcclCommunicator.h"

#if MESHFLOW_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

namespace {

using meshflow::runtime::Communicator;
using meshflow::runtime::MemoryCategory;
using meshflow::runtime::MemoryScope;
using meshflow::runtime::Tensor;
namespace cuda = meshflow::runtime::cuda;

constexpr int kSkipped = 77;

// A control channel for one device alone: a one-rank communicator never uses it.
class NoPeers final : public Communicator {
 public:
  int device() const override { return 0; }
  int deviceCount() const override { return 1; }
  void send(int, std::uint64_t, std::vector<Tensor>) override { unused(); }
  std::vector<Tensor> recv(int, std::uint64_t) override { unused(); }
  void allReduce(const std::vector<int>&, std::vector<Tensor*>) override { unused(); }
  void allGather(const std::vector<int>&, const Tensor&, Tensor&) override { unused(); }
  void reduceScatter(const std::vector<int>&, const Tensor&, Tensor&) override { unused(); }
  void allToAll(const std::vector<int>&, const Tensor&, Tensor&) override { unused(); }
  void broadcast(const std::vector<int>&, int, Tensor&) override { unused(); }
  void barrier(const std::vector<int>&) override { unused(); }

 private:
  [[noreturn]] static void unused() {
    throw std::logic_error("a one-rank NCCL communicator used its control channel");
  }
};

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());  // tools/gpu_check.sh counts these
  if (!ok) ++failures;
}

// Every call on the one-rank group, in `memory`: each hands its input back.
void checkCalls(Communicator& comm, bool managed) {
  auto memory = cuda::makeDeviceMemory(0, 0, 0, managed);
  MemoryScope scope(memory, MemoryCategory::kActivations);
  const std::string in = managed ? " (managed)" : " (device)";
  const std::vector<int> group = {0};
  const Tensor x = meshflow::runtime::randomNormal({64, 33}, 5);
  const Tensor ids = meshflow::runtime::randomInts({100}, -1000, 1000, 6);
  Tensor reduced = x.clone(), reducedIds = ids.clone();
  comm.allReduce(group, {&reduced, &reducedIds});
  check(reduced.bitEqual(x) && reducedIds.bitEqual(ids), "allReduce f32 + i32" + in);
  Tensor started = x.clone();
  comm.startAllReduce(group, {&started})->finish();
  check(started.bitEqual(x), "startAllReduce" + in);
  Tensor gathered, scattered, exchanged;
  comm.allGather(group, x, gathered);
  check(gathered.bitEqual(x), "allGather" + in);
  comm.reduceScatter(group, x, scattered);
  check(scattered.bitEqual(x), "reduceScatter" + in);
  comm.allToAll(group, x, exchanged);
  check(exchanged.bitEqual(x), "allToAll (ncclSend/ncclRecv to itself)" + in);
  Tensor root = x.clone(), into;
  comm.broadcast(group, 0, root);
  check(root.bitEqual(x), "broadcast" + in);
  comm.send(0, 3, {x});
  check(comm.recv(0, 3).at(0).bitEqual(x), "send/recv to itself" + in);
  comm.barrier(group);
  check(true, "barrier" + in);
}

}  // namespace

int main() {
#if !MESHFLOW_HAVE_NCCL
  std::printf("SKIPPED: this build of meshflow has no NCCL\n");
  return kSkipped;
#else
  if (cuda::deviceCount() == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", cuda::noDeviceReason().c_str());
    return kSkipped;
  }
  try {
    cudaSetDevice(0);
    cudaStream_t stream = nullptr;
    cudaStreamCreate(&stream);
    NoPeers control;
    cuda::NcclCommunicatorOptions options;
    options.calls = cuda::ncclCalls();
    options.stream = stream;
    options.timeout = std::chrono::seconds(60);
    options.prepareThread = [] { cudaSetDevice(0); };
    std::printf("test_nccl_one_rank: NcclCommunicator with one rank on GPU 0\n");
    {
      cuda::NcclCommunicator comm(control, options);
      checkCalls(comm, true);
      checkCalls(comm, false);
    }
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
  std::printf("%s\n", failures == 0 ? "all NCCL checks passed" : "NCCL checks FAILED");
  return failures == 0 ? 0 : 1;
#endif
}
