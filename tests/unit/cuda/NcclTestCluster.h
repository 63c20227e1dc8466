// Devices that talk through cuda::NcclCommunicator on the fake NCCL
// (FakeNccl.h), with cpu::LocalCluster endpoints as their control channel:
// the NCCL communicator's host-side logic end to end, on threads, without a GPU.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "runtime/cpu/LocalCluster.h"
#include "runtime/cuda/NcclCommunicator.h"
#include "tests/unit/cuda/FakeNccl.h"

namespace meshflow::test {

class NcclTestCluster {
 public:
  explicit NcclTestCluster(int devices,
                           std::chrono::milliseconds timeout = std::chrono::seconds(10))
      : control({.devices = devices, .timeout = timeout}) {
    for (int d = 0; d < devices; ++d) {
      runtime::cuda::NcclCommunicatorOptions options;
      options.calls = fake->calls(d);
      options.stream = fake->stream(d);
      options.timeout = timeout;
      options.stopped = [this] { return control.aborted(); };
      comms.push_back(
          std::make_unique<runtime::cuda::NcclCommunicator>(control.communicator(d), options));
    }
  }

  runtime::cuda::NcclCommunicator& communicator(int device) {
    return *comms.at(static_cast<std::size_t>(device));
  }
  void run(const std::function<void(int device)>& body) { control.run(body); }

  std::shared_ptr<FakeNccl> fake = std::make_shared<FakeNccl>();
  runtime::cpu::LocalCluster control;
  std::vector<std::unique_ptr<runtime::cuda::NcclCommunicator>> comms;
};

}  // namespace meshflow::test
