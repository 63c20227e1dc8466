// What lowering needs to know about a pipelined, data-parallel plan: a plain
// struct, so that the planner can fill it from its decisions and tests and
// benchmarks can write one by hand.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meshflow::passes {

/// Gradients summed inside each replica's mesh once per step (a batch split
/// over the tensor axis leaves every device a partial sum): an all-reduce of
/// `bytes` per device over the groups of the mesh's devices (in logical-mesh
/// order) whose index i holds i's `members` devices `stride` apart, i.e.
/// {base + k·stride : k < members} with base = i − ((i / stride) mod members)·stride.
struct MeshGradientSync {
  int64_t bytes = 0;
  int stride = 1;
  int members = 1;
};

/// One pipeline rank: the layers it holds (all its model chunks together) and the
/// devices that run them. Costs and bytes are per microbatch and per device.
struct StageDescription {
  /// meshes[r]: the device ids of this rank's submesh in data-parallel replica r.
  /// Every rank has one mesh per replica; a rank's meshes all have the same size
  /// (its tensor-parallel degree); device k of the mesh of replica r synchronises
  /// gradients with device k of every other replica's mesh. No device appears twice.
  std::vector<std::vector<int>> meshes;

  /// Seconds per microbatch on each device of the mesh, for the rank's whole share
  /// of the model (with v chunks a chunk takes 1/v of each). `backwardSeconds` is
  /// the whole backward, B = I + W; zero-bubble schedules run an input-gradient
  /// step of backward − weightGrad and a weight-gradient step of weightGrad, the
  /// others ignore weightGradSeconds (as passes/schedules/ScheduleTiming.h).
  double forwardSeconds = 1;
  double backwardSeconds = 2;
  double weightGradSeconds = 1;
  /// Seconds of the optimizer step, once per step on each device.
  double updateSeconds = 0;

  /// Bytes of the activation one microbatch sends from each chunk of this rank to
  /// the next virtual stage, as each device of the mesh holds it (replicated, as
  /// after a tensor-parallel block). Its gradient comes back with the same size.
  int64_t activationBytes = 0;
  /// Bytes each device keeps from a microbatch's forward until its backward (the
  /// stage input included), for the whole share; a chunk keeps 1/v of it.
  int64_t heldActivationBytes = 0;
  /// Bytes of parameters and optimizer state on each device, held all step.
  int64_t parameterBytes = 0;
  /// Bytes of weight gradients on each device, held all step and all-reduced
  /// across the data-parallel replicas once per step.
  int64_t gradientBytes = 0;

  /// Activation recomputation: each backward (B, or I) of the rank starts with a
  /// RUN R of `recomputeSeconds` (per microbatch: the one layer the runtime
  /// reruns ahead of the backward, the others rerunning inside it; part of
  /// backwardSeconds, not in addition to it) that rebuilds `recomputeBytes` of
  /// activations, held until the backward (W for zero-bubble kinds) is done.
  /// heldActivationBytes is then what the forward keeps without them.
  bool recompute = false;
  double recomputeSeconds = 0;
  int64_t recomputeBytes = 0;

  /// Sharded optimizer state (ZeRO-like), with more than one replica: each
  /// gradient bucket is reduce-scattered over the replicas instead of
  /// all-reduced, the UPDATE updates this replica's shard of the parameters
  /// and their state, and an ALL_GATHER of the updated parameters over the
  /// replicas follows it. gradientBytes is then what the backward makes
  /// before the reduce-scatter (the whole gradients), which is also what the
  /// parameters that have gradients weigh.
  bool shardOptimizer = false;
  /// Gradient synchronisation inside each mesh, beside the replicas' buckets:
  /// all-reduced on the grad stream before the UPDATE, which waits for it (the
  /// runtime sums these partial gradients inside its update).
  std::vector<MeshGradientSync> meshSyncs;
};

struct PipelineDescription {
  /// The pipeline ranks in order; the schedule's p is stages.size().
  std::vector<StageDescription> stages;
  /// Total devices of the program; ids in the meshes are below it. 0 means one
  /// more than the largest id used.
  int deviceCount = 0;

  /// The schedule (see passes/schedules/Schedules.h): kind, microbatches per
  /// replica per step, chunks per rank (0: the kind's default) and, for
  /// interleaved, the microbatch group size (0: p).
  std::string schedule = "1f1b";
  int microbatches = 1;
  int chunks = 0;
  int groupSize = 0;

  /// Gradient synchronisation works in buckets of at most this many bytes, each
  /// all-reduced as soon as the backward has finished it (PyTorch DDP's default
  /// bucket is 25 MiB). At most kMaxBuckets buckets per chunk; larger gradients
  /// make larger buckets.
  int64_t bucketBytes = int64_t{25} << 20;
  static constexpr int kMaxBuckets = 1024;
};

}  // namespace meshflow::passes
