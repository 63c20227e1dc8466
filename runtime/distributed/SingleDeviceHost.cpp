#include "runtime/distributed/SingleDeviceHost.h"

#include <fmt/format.h>

#include <stdexcept>

#include "runtime/cpu/CoreGate.h"
#include "runtime/cpu/LocalCluster.h"

namespace meshflow::runtime {

Communicator& SingleDeviceHost::communicator(int device) {
  if (device != device_) throw std::out_of_range(fmt::format("device {} does not run in this process", device));
  return comm_;
}

void SingleDeviceHost::run(const std::function<void(int device)>& body) {
  try {
    cpu::CoreGate::Hold core(cores_, device_);
    body(device_);
  } catch (const CommError& e) {
    if (e.kind() != CommError::Kind::Aborted) abort_(fmt::format("device {}: {}", device_, e.detail()));
    throw cpu::DeviceFailure(device_, e.detail(), std::current_exception());
  } catch (const std::exception& e) {
    abort_(e.what());
    throw cpu::DeviceFailure(device_, e.what(), std::current_exception());
  }
}

}  // namespace meshflow::runtime
