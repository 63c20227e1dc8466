// Which transport a GPU job's processes choose: NCCL when built and every
// device has a GPU of its own, the mpi transport otherwise or when asked.
#include <catch2/catch.hpp>

#include "runtime/cuda/CommChoice.h"

namespace cuda = meshflow::runtime::cuda;
using Catch::Matchers::Contains;

namespace {
// Two machines with two GPUs each, one device per GPU; and two devices on one GPU.
const std::vector<std::pair<int, int>> ownGpus = {{7, 0}, {7, 1}, {9, 0}, {9, 1}};
const std::vector<std::pair<int, int>> sharedGpu = {{7, 0}, {7, 1}, {7, 0}};
}  // namespace

TEST_CASE("auto chooses NCCL only where it can run", "[cuda][nccl][comm-choice]") {
  CHECK(cuda::chooseCommTransport(nullptr, true, ownGpus).transport == cuda::CommTransport::Nccl);
  CHECK(cuda::chooseCommTransport("auto", true, ownGpus).transport == cuda::CommTransport::Nccl);
  const auto shared = cuda::chooseCommTransport("", true, sharedGpu);
  CHECK(shared.transport == cuda::CommTransport::Mpi);
  CHECK_THAT(shared.reason, Contains("device 2 is on GPU 0 with another"));
  const auto unbuilt = cuda::chooseCommTransport(nullptr, false, ownGpus);
  CHECK(unbuilt.transport == cuda::CommTransport::Mpi);
  CHECK_THAT(unbuilt.reason, Contains("no NCCL"));
}

TEST_CASE("MESHFLOW_COMM forces a transport, and nccl fails where NCCL cannot run",
          "[cuda][nccl][comm-choice]") {
  CHECK(cuda::chooseCommTransport("mpi", true, ownGpus).transport == cuda::CommTransport::Mpi);
  CHECK(cuda::chooseCommTransport("nccl", true, ownGpus).transport == cuda::CommTransport::Nccl);
  CHECK_THROWS_WITH(cuda::chooseCommTransport("nccl", true, sharedGpu),
                    Contains("MESHFLOW_COMM is 'nccl' but devices share a GPU"));
  CHECK_THROWS_WITH(cuda::chooseCommTransport("nccl", false, ownGpus), Contains("has no NCCL"));
  CHECK_THROWS_WITH(cuda::chooseCommTransport("NCCL", true, ownGpus),
                    Contains("MESHFLOW_COMM is 'NCCL': it must be 'nccl', 'mpi' or 'auto'"));
}
