// The parallel trainer: one training step of a pipelined, data-parallel plan on
// the cpu backend's virtual devices — the training graph cut into stages
// (passes/StagePartition.h), the plan lowered to per-device instruction streams
// (passes/Lowering.h) and every device's stream run on its own thread
// (DeviceExecutor.h) with the in-process communicator (cpu/LocalCluster.h).
//
// What it computes equals the serial reference (SerialExecutor.h) up to fp32
// rounding, provided the loss is a mean over the batch (every loss of the
// stdlib is): each microbatch's gradients are of its own mean loss, so their
// sum over microbatches and replicas is scaled by 1 / (microbatches × replicas).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/Program.h"
#include "passes/Autodiff.h"
#include "passes/PipelineDescription.h"
#include "passes/Recomputation.h"
#include "passes/StagePartition.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/parallel/DeviceExecutor.h"
#include "runtime/parallel/DeviceHost.h"
#include "runtime/parallel/SpmdRunner.h"

namespace meshflow::runtime {


/// What the runtime executes: stages, devices and the schedule.
struct ParallelPlan {
  /// The virtual stage of each op of the forward graph (leaves are ignored).
  std::vector<int> stageOfForwardOp;
  /// The layer of each op of the forward graph: a recomputing stage keeps each
  /// layer's inputs and reruns one layer at a time (passes/Recomputation.h).
  /// Empty: each stage is one layer.
  std::vector<int> layerOfForwardOp;
  int virtualStages = 1;
  /// rankDevices[r]: the devices of pipeline rank r, replica-major: with n the
  /// devices of the rank's mesh, device i·n + j is device j (row-major) of
  /// data-parallel replica i's mesh. Every rank has the same replicas; with v
  /// chunks per rank, rank r runs the virtual stages the schedule gives it.
  std::vector<std::vector<int>> rankDevices{{0}};
  /// rankMeshes[r]: the logical mesh (a, b) on which each replica of rank r
  /// runs its stages' ops SPMD; a 1 × 1 mesh (and every rank when empty) runs
  /// whole ops on one device. Ranks may differ: a value crossing to a rank of
  /// another mesh size travels in tiles and is gathered (docs/runtime.md).
  std::vector<std::array<std::int64_t, 2>> rankMeshes;
  /// The strategy of each forward op on its rank's mesh; ops without one (and
  /// every op when it is empty) take their layout from the SPMD rules.
  std::map<ir::OpId, PlannedSpecs> strategies;
  std::string schedule = "1f1b";
  int microbatches = 1;
  int groupSize = 0;  ///< Interleaved: microbatches per group (0: ranks).
  /// Seconds per rank as the cost model predicts them (forward, backward, weight
  /// gradient, update); they only time the Program for the simulator. Empty:
  /// 1, 2, 1 and 0 seconds.
  std::vector<passes::StageDescription> costs;
  /// Activation recomputation per virtual stage (passes/Recomputation.h);
  /// empty, or a shorter list: none for the stages it leaves out.
  std::vector<passes::Recompute> recompute;
  /// Sharded optimizer state (ZeRO-like) per pipeline rank; empty, or a
  /// shorter list: unsharded for the ranks it leaves out. A rank shards only
  /// with more than one data-parallel replica (docs/runtime.md).
  std::vector<bool> shardOptimizer;
  /// Run each attention as one fused kernel forward and one backward, as a
  /// plan for a device with fused kernels prices it (`fused_kernels = true`;
  /// runtime/AttentionGroups.h), on every mesh (SPMD: in q's layout on batch
  /// and heads), except in stages that recompute selectively.
  bool fusedAttention = false;

  /// Rank r's mesh ({1, 1} when rankMeshes is empty).
  std::array<std::int64_t, 2> meshOf(int rank) const;
  /// Devices of one replica's mesh on rank r.
  int meshSize(int rank) const;
  /// Data-parallel replicas of every rank.
  int replicas() const;
  /// Every rank's mesh has the same shape.
  bool sameMeshes() const;
  /// How virtual stage `vs` recomputes.
  passes::Recompute recomputeOf(int vs) const;
  /// Rank r's replicas each update only their shard of its optimizer state.
  bool shardsOptimizer(int rank) const;
};

struct ParallelOptions {
  std::int64_t batch = 1;  ///< Samples per step, over all replicas and microbatches.
  int devices = 0;         ///< Virtual devices; 0: as many as the plan uses.
  std::chrono::milliseconds timeout{60000};  ///< Longest wait for a message or collective.
  /// Host cores the device threads share (cpu/CoreGate.h): at most this many
  /// compute at once. 0: every device thread computes whenever it can.
  int hostCores = 0;
  std::int64_t bucketBytes = std::int64_t{25} << 20;  ///< Gradient buckets, as PyTorch DDP.
  /// Bytes of tensors each device may hold (cpu(memory = ...)); an allocation
  /// beyond it stops the step with an error naming the device, the
  /// instruction and the bytes. 0: unlimited.
  std::int64_t deviceMemory = 0;
  std::optional<InjectedFault> fault;                 ///< Tests only.
};

/// A plan the runtime cannot run, or a step that failed on a device (the message
/// names the device, step and instruction).
class ParallelRunError : public std::runtime_error {
 public:
  explicit ParallelRunError(const std::string& message, bool aborted = false)
      : std::runtime_error(message), aborted_(aborted) {}
  /// The step failed here only because another device (in another process)
  /// failed first and stopped the run: that device's error is the cause.
  bool aborted() const { return aborted_; }

 private:
  bool aborted_ = false;
};

struct ParallelStepResult {
  double loss = 0;     ///< Mean over the step's microbatches and replicas.
  /// The sum of the microbatch losses the devices here made, and how many:
  /// what a controller adds up over processes (loss = lossSum / losses).
  double lossSum = 0;
  int losses = 0;
  /// The (token, expert) choices the step's moe_dispatch ops dropped past
  /// their experts' capacity, over every microbatch and replica (as the
  /// serial reference counts them for the whole batch).
  double moeDropped = 0;
  double seconds = 0;  ///< Wall time of the step.
  std::vector<DeviceTimes> devices;
  /// Per device: the bytes its tensors held during the step, by category
  /// (runtime/memory/DeviceMemory.h); all zero for a device the plan leaves idle.
  std::vector<MemoryStats> memory;
};

class ParallelTrainer {
 public:
  /// Partitions and lowers; throws ParallelRunError (or StagePartitionError,
  /// LoweringError, ScheduleError) for a plan that does not fit the graph.
  /// The devices run on `host`: by default every device on a thread of this
  /// process (cpu::LocalCluster); a host that runs only some devices here
  /// (the mpi backend) leaves the others' state, steps and results to their
  /// processes (state(), shards() and step() then see only the devices here).
  ParallelTrainer(const passes::TrainingGraph& training, ParallelPlan plan, ParallelOptions options,
                  std::unique_ptr<DeviceHost> host = nullptr);
  ~ParallelTrainer();

  /// Hands every device the parameters and optimizer state of its stages.
  void setState(const TensorMap& state);
  /// The whole value of a state tensor by name.
  using StateSource = std::function<Tensor(const std::string& name)>;
  /// The same from `whole`, asked only for the tensors the devices here hold
  /// (once per device and tensor), each device keeping its share: a process
  /// that runs one device of a job makes only its own part of the state
  /// (parameterInitializer), one whole tensor at a time.
  void setState(const StateSource& whole);
  /// The whole state, assembled from the first replica of every rank (and a
  /// sharded optimizer's state from every replica's shard).
  TensorMap state() const;
  /// One replicated state tensor as the first device holding it has it (the
  /// loss scale, which every holder updates alike), without assembling the
  /// whole state; none when no device holds `name`.
  std::optional<Tensor> replicatedState(const std::string& name) const;
  /// What each device holds, for a checkpoint: on a mesh of several devices
  /// each its boxes of the parameters and optimizer state (under the plan's
  /// layout of each parameter), else whole tensors; replicas repeat them,
  /// except a sharded optimizer's state, of which each replica holds a flat
  /// run of each box (a flat piece, without the padding).
  /// With `storedOnce`, a device leaves out the pieces a lower-numbered
  /// device of the plan holds too (a replica's copies), so that processes
  /// that each write their devices' pieces store every piece once.
  std::vector<DeviceShard> shards(bool storedOnce = false) const;

  /// Runs training step `step` (1-based) on `batch`, the graph inputs of the
  /// whole step. After a failure the devices' state is inconsistent: resume
  /// from a checkpoint.
  ParallelStepResult step(const TensorMap& batch, std::int64_t step);

  /// What device `device` holds (empty for a device that does not run here),
  /// and, for a controller assembling the whole state, what another process's
  /// device holds (state() then counts it).
  const TensorMap& deviceState(int device) const;
  void setDeviceState(int device, TensorMap held);
  /// The devices the plan gives work (every device of every pipeline rank).
  std::vector<int> planDevices() const;

  const ir::Program& program() const { return program_; }
  const passes::StagePartition& partition() const { return partition_; }
  int replicas() const;

 private:
  // One tensor of the state a device holds: its name, whole shape and layout.
  // With `flat`, the device holds replica `replica`'s flat shard of its box
  // (FlatShards.h) instead of the box.
  struct HeldState {
    std::string name;
    Shape shape;
    ir::ShardingSpec spec;
    bool flat = false;
  };
  std::vector<HeldState> heldState(int device) const;
  // The attentions the runner runs fused (plan_.fusedAttention).
  std::vector<AttentionGroup> attentionToFuse() const;
  // Where device's piece of `s` lies: name, offset, block and (flat) the
  // first element of its run; none when its flat shard holds none of it.
  struct PieceKey {
    std::string name;
    std::vector<std::int64_t> offset;
    Shape block;
    std::int64_t flatBegin = -1;
    auto operator<=>(const PieceKey&) const = default;
  };
  std::optional<PieceKey> pieceKey(int device, const HeldState& s) const;
  /// Divides the loss scale each device holds by the step's microbatches ×
  /// replicas for the step; returns what each held before, by device.
  std::vector<float> shareLossScale();
  /// After the step: each device's loss scale is what it held before, times
  /// what the step's scaler did to the divided one (½, 1 or 2: exact).
  void restoreLossScale(const std::vector<float>& before);
  MeshPlace placeOf(int device) const;
  std::vector<TensorMap> microbatchesOf(const TensorMap& batch, int replica) const;
  passes::PipelineDescription describe() const;
  bool flatState(int rank, ir::ValueId v) const;
  int replicaOf(int device) const;
  Tensor wholeBox(const HeldState& s, int rank, int member) const;

  passes::TrainingGraph training_;
  ParallelPlan plan_;
  ParallelOptions options_;
  passes::StagePartition partition_;
  std::vector<passes::StageRecomputation> recomputation_;  // per virtual stage
  std::vector<StageReleases> releases_;                    // per virtual stage
  std::int64_t microbatchSize_ = 1;
  ir::Program program_;
  std::unique_ptr<OpRunner> runner_;
  std::vector<std::unique_ptr<SpmdRunner>> spmd_;  // per rank; null on a 1 × 1 mesh
  std::unique_ptr<DeviceHost> host_;
  std::vector<std::shared_ptr<DeviceMemory>> memory_;  // per device
  std::vector<TensorMap> deviceState_;  // on a mesh of several devices: boxes
  std::vector<std::vector<int>> stagesOfRank_;  // per pipeline rank: its virtual stages
  // Per device (-1 if unused): its pipeline rank, and its slot in that rank's
  // devices (replica slot / n, member of the replica's mesh slot % n).
  std::vector<int> rankOf_, slotOf_;
  // Per device: its member index in its replica's mesh and that mesh's size.
  std::vector<MeshMember> members_;
  // Per replica: its devices on every rank, rank-major.
  std::vector<std::vector<int>> replicaDevices_;
  // Every device of every replica, replica-major: the clipping norm's group
  // when some rank shards its optimizer state (each replica then counts
  // only its shard of those gradients).
  std::vector<int> allDevices_;
  bool anySharded_ = false;
  // The optimizer-state leaves (inputs 3 and 4 of the optimizer ops), sorted.
  std::vector<ir::ValueId> optimizerState_;
};

}  // namespace meshflow::runtime
