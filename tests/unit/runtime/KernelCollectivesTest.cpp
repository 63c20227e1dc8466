// The in-process communicator on device threads with kernels of their own (a
// KernelScope, as the cuda backend's virtual devices have): its sums, gathers,
// scatters and exchanges run as ops on those kernels and give the host path's
// bits, in f32 and the half types.
#include <catch2/catch.hpp>

#include <atomic>
#include <limits>

#include "runtime/KernelBackend.h"
#include "runtime/cpu/LocalCluster.h"

namespace runtime = meshflow::runtime;
using meshflow::ir::DType;
using runtime::Tensor;

namespace {

// The cpu kernels, counted.
class CountingKernels final : public runtime::KernelBackend {
 public:
  void run(const meshflow::ir::Op& op, const std::vector<const Tensor*>& in, std::vector<Tensor*>& out,
           const runtime::cpu::KernelContext& ctx) override {
    ++ops;
    runtime::cpu::runKernel(op, in, out, ctx);
  }
  std::atomic<int> ops{0};
};

struct Results {
  std::vector<Tensor> reduced, gathered, scattered, exchanged;
};

// Every collective on 3 devices, each with its own input, with or without kernels.
Results collectives(DType dtype, runtime::KernelBackend* kernels) {
  constexpr int kDevices = 3;
  Results r;
  r.reduced.resize(kDevices);
  r.gathered.resize(kDevices);
  r.scattered.resize(kDevices);
  r.exchanged.resize(kDevices);
  runtime::cpu::LocalCluster cluster({kDevices});
  const std::vector<int> group{2, 0, 1};  // member order is not device order
  cluster.run([&](int device) {
    runtime::KernelScope scope(kernels);
    Tensor mine = runtime::randomNormal({6, 5}, 40 + static_cast<std::uint64_t>(device)).castTo(dtype);
    auto& comm = cluster.communicator(device);
    Tensor sum = mine;
    comm.allReduce(group, {&sum});
    Tensor gathered, scattered, exchanged;
    comm.allGather(group, mine, gathered);
    comm.reduceScatter(group, mine, scattered);
    comm.allToAll(group, mine, exchanged);
    r.reduced[static_cast<std::size_t>(device)] = sum;
    r.gathered[static_cast<std::size_t>(device)] = gathered;
    r.scattered[static_cast<std::size_t>(device)] = scattered;
    r.exchanged[static_cast<std::size_t>(device)] = exchanged;
  });
  return r;
}

void requireBitEqual(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const char* what) {
  REQUIRE(a.size() == b.size());
  for (std::size_t d = 0; d < a.size(); ++d) {
    INFO(what << " on device " << d << ": " << a[d].typeText() << " vs " << b[d].typeText());
    CHECK(a[d].bitEqual(b[d]));
  }
}

}  // namespace

TEST_CASE("collectives on the device threads' kernels give the host path's bits", "[runtime][communicator]") {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    INFO(meshflow::ir::dtypeName(dtype));
    const Results host = collectives(dtype, nullptr);
    CountingKernels kernels;
    const Results onKernels = collectives(dtype, &kernels);
    CHECK(kernels.ops > 0);
    requireBitEqual(onKernels.reduced, host.reduced, "allReduce");
    requireBitEqual(onKernels.gathered, host.gathered, "allGather");
    requireBitEqual(onKernels.scattered, host.scattered, "reduceScatter");
    requireBitEqual(onKernels.exchanged, host.exchanged, "allToAll");
    // The sum is really of all three (not one device's operand passed through).
    CHECK_FALSE(host.reduced[0].bitEqual(runtime::randomNormal({6, 5}, 40).castTo(dtype)));
  }
}

TEST_CASE("i32 collectives stay on the host, wrapping", "[runtime][communicator]") {
  CountingKernels kernels;
  runtime::cpu::LocalCluster cluster({2});
  std::vector<std::int32_t> sums(2);
  cluster.run([&](int device) {
    runtime::KernelScope scope(&kernels);
    Tensor t = Tensor::fromI32({1}, {std::numeric_limits<std::int32_t>::max()});
    cluster.communicator(device).allReduce({0, 1}, {&t});
    sums[static_cast<std::size_t>(device)] = t.i32()[0];
  });
  CHECK(kernels.ops == 0);
  CHECK(sums[0] == -2);
  CHECK(sums[1] == -2);
}
