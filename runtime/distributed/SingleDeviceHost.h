// A DeviceHost that runs one device in this process (each process of an mpi
// job runs one): the body runs on the calling thread, and a failure tells the
// other processes at once (through `abort`) before it is rethrown.
#pragma once

#include <functional>
#include <string>

#include "runtime/parallel/DeviceHost.h"

namespace meshflow::runtime {

class SingleDeviceHost final : public DeviceHost {
 public:
  /// `cores`: the host cores this process shares with others (null: its own).
  SingleDeviceHost(int device, Communicator& comm, std::function<void(const std::string&)> abort,
                   cpu::CoreGate* cores = nullptr)
      : device_(device), comm_(comm), abort_(std::move(abort)), cores_(cores) {}

  bool runsHere(int device) const override { return device == device_; }
  Communicator& communicator(int device) override;
  cpu::CoreGate* cores() override { return cores_; }
  /// Runs body(device), holding a host core while it computes; a failure
  /// that is not an abort from elsewhere calls `abort` with its message, and
  /// any failure is rethrown as cpu::DeviceFailure.
  void run(const std::function<void(int device)>& body) override;

 private:
  int device_;
  Communicator& comm_;
  std::function<void(const std::string&)> abort_;
  cpu::CoreGate* cores_;
};

}  // namespace meshflow::runtime
