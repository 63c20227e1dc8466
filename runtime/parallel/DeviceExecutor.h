// The executor of one virtual device: runs that device's instruction stream of
// an ir::Program — RUN, SEND, RECV, ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, FREE,
// UPDATE — against real tensors (docs/runtime.md, "The executor").
//
// A RUN executes the local kernels of its stage's forward, backward (B, or I and
// W) for one microbatch; buffers hold bundles of tensors keyed by value id (an
// activation buffer holds the stage's forward carry, a stash what its backward
// reads, a gradient bucket a group of accumulated weight gradients). A backward
// split into pieces for bucketed gradient synchronisation computes the whole
// backward at its first piece; each piece then hands its bucket over.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "ir/Program.h"
#include "passes/Recomputation.h"
#include "passes/StagePartition.h"
#include "runtime/Communicator.h"
#include "runtime/cpu/CoreGate.h"
#include "runtime/parallel/OpRunner.h"
#include "runtime/parallel/SpmdRunner.h"
#include "runtime/sim/Simulator.h"

namespace meshflow::runtime {

/// A test hook: throw on `device` at `step` just before instruction `instruction`.
struct InjectedFault {
  int device = 0;
  std::int64_t step = 1;
  std::size_t instruction = 0;
};

/// Where a device spent one step.
struct DeviceTimes {
  double kernelSeconds = 0;  ///< Inside the stage kernels (RUN, UPDATE).
  double commSeconds = 0;    ///< Inside send, recv and collectives, waiting included.
  double coreWaitSeconds = 0;  ///< In line for a host core before a RUN or UPDATE (cpu/CoreGate.h).
  double totalSeconds = 0;   ///< The whole instruction stream.
  /// Every instruction but FREE, in program order, with its start and end in
  /// seconds since the step began (the simulator's form, so a measured step
  /// prints and exports as a simulated one does). A RUN or UPDATE starts when
  /// it has a host core (the wait for one is coreWaitSeconds).
  std::vector<sim::TimedInstruction> timeline;
};

/// A device's place in its replica's mesh: its index and the mesh's size.
struct MeshMember {
  int index = 0;
  int size = 1;
};

/// What one device needs to run its stream for one step.
struct DeviceStep {
  int device = 0;
  std::int64_t step = 1;
  /// The optimizer's step (cpu::optimizerStep): the step its updates run with.
  std::int64_t optimizerStep = 1;
  /// When the step began on every device: the timeline's zero.
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  const ir::Program* program = nullptr;
  const passes::StagePartition* partition = nullptr;
  /// Per virtual stage: what its forward keeps and its RUN R reruns.
  const std::vector<passes::StageRecomputation>* recomputation = nullptr;
  /// Per virtual stage and RUN kind: when each value of a RUN is freed (null:
  /// at the RUN's end).
  const std::vector<StageReleases>* releases = nullptr;
  const OpRunner* runner = nullptr;
  /// On a mesh of several devices: RUNs and the UPDATE run their ops SPMD on
  /// `mesh`; `state` holds this device's boxes of the parameters and optimizer
  /// state, and the values that outlive a RUN (the stash, gradients, and with
  /// `shardedCarries` the carries) stay in their layouts.
  const SpmdRunner* spmd = nullptr;
  MeshPlace mesh;
  /// Every rank runs on a mesh of the same shape, so member j sends member j
  /// its boxes of the carries; otherwise carries cross whole.
  bool shardedCarries = false;
  /// Every device's MeshMember, by device id: which tile of a value a SEND to
  /// a device of a mesh of another size carries.
  const std::vector<MeshMember>* members = nullptr;
  Communicator* comm = nullptr;
  /// The host cores this device shares with the others: its thread holds one
  /// (LocalCluster::run), and before each RUN and UPDATE it lets the devices
  /// that waited longer go first. Null: it computes whenever it can.
  cpu::CoreGate* cores = nullptr;
  /// Parameters and optimizer state of the stages this device runs (its boxes
  /// of them on a mesh of several devices); updated in place.
  TensorMap* state = nullptr;
  /// The device's memory: every tensor the step allocates is counted there
  /// (null: the plain heap).
  std::shared_ptr<DeviceMemory> memory;
  /// The graph inputs of each microbatch this device's replica runs; the
  /// first of them starts at sample `firstSample` of the step's batch, the
  /// next `microbatchSize` later (dropout draws the whole batch's masks).
  const std::vector<TensorMap>* microbatches = nullptr;
  std::int64_t firstSample = 0;
  std::int64_t microbatchSize = 0;
  /// Accumulated gradients are multiplied by this before the update (1 / samples' share).
  float gradientScale = 1;
  /// Every device of this device's data-parallel replica, on every rank.
  /// Gradient clipping all-reduces the squared gradient norm over it (each
  /// mesh's first member contributes its stages' share). With
  /// `clipOverReplicas` it is every device of every replica instead: some
  /// rank shards its optimizer state, so each replica holds only a shard of
  /// those gradients; whole gradients are then counted by replica 0 alone.
  const std::vector<int>* replicaGroup = nullptr;
  bool clipOverReplicas = false;
  /// Sharded optimizer state (ZeRO-like) on this device's rank: each gradient
  /// bucket is reduce-scattered into this replica's flat shard
  /// (FlatShards.h), the UPDATE updates that shard of the parameters and their
  /// state (`state` holds the state's shards only), and the ALL_GATHER of the
  /// parameters buffer makes the parameters whole again.
  bool shardOptimizer = false;
  int replica = 0;   ///< This device's data-parallel replica.
  int replicas = 1;  ///< Data-parallel replicas of the run.
  std::optional<InjectedFault> fault;
};

struct DeviceResult {
  double lossSum = 0;  ///< Sum of the losses of the microbatches whose loss this device made.
  int losses = 0;
  /// The (token, expert) choices its forward moe_dispatch ops dropped past
  /// capacity (reruns for recomputation not counted again).
  double moeDropped = 0;
  DeviceTimes times;
};

/// A device failed: what() names the device, the step, the instruction index and
/// its text, then the cause.
class DeviceExecutionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs `step.device`'s instruction stream once.
DeviceResult executeDevice(const DeviceStep& step);

}  // namespace meshflow::runtime
