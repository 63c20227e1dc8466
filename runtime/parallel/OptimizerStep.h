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
///
/// With step.shardOptimizer the gradients are this replica's flat shards
/// (FlatShards.h, of the boxes the parameters are held in) and the state holds
/// only the optimizer state's shards: the optimizer ops run on the shards, the
/// state's shards are updated in place and the parameters' updated shards go
/// to `updatedShards` by name, for the ALL_GATHER that follows.
///
/// A mixed-precision model's half parameters are rounded from their fp32
/// masters after the update; with step.shardOptimizer only once the masters
/// are whole again, by roundMasters after the ALL_GATHER.
DeviceTimes runUpdate(const DeviceStep& step, const std::set<int>& stages, ValueTable gradients,
                      const std::map<ir::ValueId, ir::ShardingSpec>& specs, TensorMap* updatedShards = nullptr);

/// Rounds each whole fp32 master weight of `stages` into its half parameter
/// (the update's casts), as a sharded update leaves them to do after the
/// ALL_GATHER.
void roundMasters(const DeviceStep& step, const std::set<int>& stages);

}  // namespace meshflow::runtime
