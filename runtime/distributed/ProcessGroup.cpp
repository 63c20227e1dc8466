#include "runtime/distributed/ProcessGroup.h"

#include "runtime/GpuHosts.h"
#include "runtime/distributed/TrainingJob.h"

namespace meshflow::runtime {

std::unique_ptr<DeviceHost> jobHost(ProcessGroup& group, const TrainingJob& job) {
  std::unique_ptr<DeviceHost> host = group.deviceHost(job.options.timeout);
  if (!job.onGpus) return host;
  GpuHostRequest request;
  request.devices = job.options.devices;
  request.timeout = job.options.timeout;
  request.process = std::move(host);
  request.localRank = group.localRank();
  request.stopped = [&group] { return group.stopSeen(); };
  return makeGpuHost(request);
}

}  // namespace meshflow::runtime
