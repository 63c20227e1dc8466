// The UPDATE instruction of one device (docs/runtime.md, "The executor").
#pragma once

#include <map>
#include <set>

#include "ir/Sharding.h"
#include "runtime/parallel/DeviceExecutor.h"

namespace meshflow::runtime {

/// Updates the parameters and optimizer state of `stages` on `step.device`:
/// the step's weight gradients (`gradients`, by value id, already summed over
/// microbatches and replicas, each held in `specs`' layout — absent: whole)
/// are scaled by step.gradientScale, clipped by the replica's global norm when
/// the training graph clips, and handed to the optimizer ops — whole, or SPMD
/// on the device's boxes on a mesh of several devices. Returns the time spent.
DeviceTimes runUpdate(const DeviceStep& step, const std::set<int>& stages, ValueTable gradients,
                      const std::map<ir::ValueId, ir::ShardingSpec>& specs);

}  // namespace meshflow::runtime
