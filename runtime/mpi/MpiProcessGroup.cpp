#include "runtime/mpi/MpiProcessGroup.h"

#include "runtime/distributed/SingleDeviceHost.h"

namespace meshflow::runtime::mpi {

std::unique_ptr<DeviceHost> MpiProcessGroup::deviceHost(std::chrono::milliseconds timeout) {
  MpiOptions options = process_.options();
  options.timeout = timeout;
  process_.setOptions(options);
  MpiProcess& process = process_;
  return std::make_unique<SingleDeviceHost>(
      process.rank(), process.communicator(),
      [&process](const std::string& reason) { process.abort(reason); }, process.hostCores());
}

}  // namespace meshflow::runtime::mpi
