// The cpu backend's devices (a LocalCluster), each device thread holding a
// KernelScope of a backend of its own: how the parallel tests put a test
// KernelBackend where the cuda backend's kernels would be.
#pragma once

#include <cstddef>
#include <deque>
#include <functional>

#include "runtime/KernelBackend.h"
#include "runtime/cpu/LocalCluster.h"
#include "runtime/parallel/DeviceHost.h"

namespace meshflow::parallel_test {

template <class Kernels>
class ScopedKernelsHost : public runtime::DeviceHost {
 public:
  /// One Kernels(args...) per device, built in place (backends may hold atomics).
  template <class... Args>
  explicit ScopedKernelsHost(int devices, Args&&... args) : cluster_({devices}) {
    for (int d = 0; d < devices; ++d) kernels_.emplace_back(args...);
  }
  bool runsHere(int device) const override { return cluster_.runsHere(device); }
  runtime::Communicator& communicator(int device) override { return cluster_.communicator(device); }
  runtime::cpu::CoreGate* cores() override { return nullptr; }
  void run(const std::function<void(int)>& body) override {
    cluster_.run([&](int device) {
      runtime::KernelScope scope(&kernels_[static_cast<std::size_t>(device)]);
      body(device);
    });
  }
  const Kernels& kernels(int device) const { return kernels_[static_cast<std::size_t>(device)]; }

 private:
  runtime::cpu::LocalCluster cluster_;
  std::deque<Kernels> kernels_;
};

}  // namespace meshflow::parallel_test
