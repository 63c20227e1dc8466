#include "passes/Lowering.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "passes/schedules/Schedules.h"

namespace meshflow::passes {
namespace {

using ir::ActionKind;
using ir::BufferId;
using ir::BufferRole;
using ir::Instruction;
using ir::Opcode;

constexpr BufferId kNoBuffer = std::numeric_limits<BufferId>::max();

// The share of `total` that part `index` of `parts` gets; the shares add up to total.
int64_t share(int64_t total, int index, int parts) {
  const __int128 big = total;
  return static_cast<int64_t>(big * (index + 1) / parts - big * index / parts);
}

void requireValid(const PipelineDescription& description) {
  if (description.stages.empty()) throw LoweringError("a pipeline needs at least one stage");
  const size_t replicas = description.stages[0].meshes.size();
  if (replicas == 0) throw LoweringError("stage 0 has no mesh");
  if (description.bucketBytes <= 0) throw LoweringError("bucketBytes must be positive");
  for (size_t s = 0; s < description.stages.size(); ++s) {
    const StageDescription& stage = description.stages[s];
    if (stage.meshes.size() != replicas) {
      throw LoweringError(fmt::format("stage {} has {} replicas, stage 0 has {}", s,
                                      stage.meshes.size(), replicas));
    }
    for (const std::vector<int>& mesh : stage.meshes) {
      if (mesh.empty() || mesh.size() != stage.meshes[0].size()) {
        throw LoweringError(fmt::format("stage {}: every replica's mesh needs the same, nonzero "
                                        "number of devices",
                                        s));
      }
    }
    if (stage.forwardSeconds < 0 || stage.backwardSeconds < 0 || stage.weightGradSeconds < 0 ||
        stage.updateSeconds < 0) {
      throw LoweringError(fmt::format("stage {}: costs must not be negative", s));
    }
    if (stage.activationBytes < 0 || stage.heldActivationBytes < 0 || stage.parameterBytes < 0 ||
        stage.gradientBytes < 0 || stage.recomputeBytes < 0) {
      throw LoweringError(fmt::format("stage {}: bytes must not be negative", s));
    }
    if (stage.recomputeSeconds < 0 || stage.recomputeSeconds > stage.backwardSeconds) {
      throw LoweringError(fmt::format("stage {}: recomputeSeconds must be within backwardSeconds", s));
    }
  }
}

int countDevices(const PipelineDescription& description) {
  int largest = -1;
  for (const StageDescription& stage : description.stages) {
    for (const std::vector<int>& mesh : stage.meshes) {
      for (int device : mesh) largest = std::max(largest, device);
    }
  }
  const int count = description.deviceCount > 0 ? description.deviceCount : largest + 1;
  std::vector<bool> seen(static_cast<size_t>(count), false);
  for (size_t s = 0; s < description.stages.size(); ++s) {
    for (const std::vector<int>& mesh : description.stages[s].meshes) {
      for (int device : mesh) {
        if (device < 0 || device >= count) {
          throw LoweringError(fmt::format("stage {}: device {} is outside 0..{}", s, device,
                                          count - 1));
        }
        if (seen[static_cast<size_t>(device)]) {
          throw LoweringError(fmt::format("device {} appears in more than one mesh", device));
        }
        seen[static_cast<size_t>(device)] = true;
      }
    }
  }
  return count;
}

// Where one device sits: replica, pipeline rank, and index within the rank's mesh.
struct Place {
  int replica = 0;
  int rank = 0;
  int index = 0;
  int device = 0;
};

class Lowerer {
 public:
  Lowerer(const PipelineDescription& description, ir::PipelineSchedule schedule, int devices)
      : d_(description),
        schedule_(std::move(schedule)),
        program_(devices),
        replicas_(static_cast<int>(description.stages[0].meshes.size())),
        virtualStages_(schedule_.virtualStages()),
        microbatches_(schedule_.microbatches) {
    for (const StageDescription& stage : d_.stages) {
      maxMesh_ = std::max(maxMesh_, static_cast<int>(stage.meshes[0].size()));
    }
    incoming_.assign(static_cast<size_t>(replicas_) * virtualStages_ * microbatches_ * maxMesh_ * 2,
                     kNoBuffer);
  }

  ir::Program run() {
    sizes_.assign(static_cast<size_t>(schedule_.stages), {});
    for (int replica = 0; replica < replicas_; ++replica) {
      for (int rank = 0; rank < schedule_.stages; ++rank) {
        const std::vector<int>& mesh = meshOf(rank, replica);
        for (int k = 0; k < static_cast<int>(mesh.size()); ++k) {
          const int device = mesh[static_cast<size_t>(k)];
          reserveLike(rank, device);
          lowerDevice({replica, rank, k, device});
          if (sizes_[static_cast<size_t>(rank)].instructions == 0) recordSize(rank, device);
        }
      }
      // Every replica adds as many buffers as the first.
      if (replica == 0) program_.buffers.reserve(program_.buffers.size() * replicas_);
    }
    return std::move(program_);
  }

 private:
  enum Direction { kActivation = 0, kGradient = 1 };

  // How long a rank's devices' code is: every device of a rank runs the same
  // schedule, so the first one lowered tells about how much to reserve for the
  // others (growing millions of instructions by doubling copies them and touches
  // twice the memory; a device that needs more still grows).
  struct CodeSize {
    size_t instructions = 0;
    size_t operands = 0;
  };

  void recordSize(int rank, int device) {
    const ir::DeviceCode& code = program_.devices[static_cast<size_t>(device)];
    sizes_[static_cast<size_t>(rank)] = {code.code.size(), code.operands.size()};
  }

  void reserveLike(int rank, int device) {
    const CodeSize& size = sizes_[static_cast<size_t>(rank)];
    ir::DeviceCode& code = program_.devices[static_cast<size_t>(device)];
    code.code.reserve(code.code.size() + size.instructions);
    code.operands.reserve(code.operands.size() + size.operands);
  }

  const std::vector<int>& meshOf(int rank, int replica) const {
    return d_.stages[static_cast<size_t>(rank)].meshes[static_cast<size_t>(replica)];
  }
  int meshSize(int rank) const { return static_cast<int>(d_.stages[static_cast<size_t>(rank)].meshes[0].size()); }
  int rankOf(int virtualStage) const { return schedule_.locate(virtualStage).rank; }
  const StageDescription& stageOf(int rank) const { return d_.stages[static_cast<size_t>(rank)]; }
  int chunks() const { return schedule_.chunks; }

  // The buffer that receives data flowing into (virtual stage, microbatch, mesh
  // index): the act-in, grad-in or tile that a RECV defines, or the buffer handed
  // over on the same rank. Created by whichever side touches it first.
  BufferId& incoming(int replica, int vs, int mb, int index, Direction direction) {
    const size_t slot =
        ((((static_cast<size_t>(replica) * virtualStages_ + vs) * microbatches_ + mb) * maxMesh_ +
          index) *
         2) +
        direction;
    return incoming_[slot];
  }

  BufferId incomingBuffer(int replica, int vs, int mb, int index, Direction direction,
                          int device, int64_t bytes, BufferRole role) {
    BufferId& id = incoming(replica, vs, mb, index, direction);
    if (id == kNoBuffer) id = program_.addBuffer(device, bytes, role);
    return id;
  }

  int group(std::vector<int> members) {
    auto [it, inserted] = groups_.try_emplace(members, 0);
    if (inserted) it->second = program_.addGroup(std::move(members));
    return it->second;
  }

  int replicaGroup(int rank, int index) {
    std::vector<int> members;
    for (int replica = 0; replica < replicas_; ++replica) {
      members.push_back(meshOf(rank, replica)[static_cast<size_t>(index)]);
    }
    return group(std::move(members));
  }

  // Appends `in` with the given operands, skipping kNoBuffer (an absent input or output).
  void emit(int device, Instruction in, std::initializer_list<BufferId> uses,
            std::initializer_list<BufferId> defs) {
    std::array<BufferId, 4> u{};
    std::array<BufferId, 4> d{};
    size_t useCount = 0;
    size_t defCount = 0;
    for (BufferId id : uses) {
      if (id != kNoBuffer) u[useCount++] = id;
    }
    for (BufferId id : defs) {
      if (id != kNoBuffer) d[defCount++] = id;
    }
    program_.append(device, in, std::span(u.data(), useCount), std::span(d.data(), defCount));
  }

  void emitFree(int device, BufferId id) {
    Instruction in;
    in.op = Opcode::kFree;
    emit(device, in, {id}, {});
  }

  // --- transfers between virtual stages ------------------------------------------

  /// Receives the data flowing into `to` (the activation from to−1 or the gradient
  /// from to+1) on `self`; returns the buffer that holds it whole.
  BufferId receive(const Place& self, int to, int from, int mb, Direction direction, int64_t bytes) {
    const int fromRank = rankOf(from);
    const BufferRole whole = direction == kActivation ? BufferRole::kActivationIn : BufferRole::kGradIn;
    if (fromRank == self.rank) {
      return incomingBuffer(self.replica, to, mb, self.index, direction, self.device, bytes, whole);
    }
    const int senders = meshSize(fromRank);
    const int receivers = meshSize(self.rank);
    const int peer = meshOf(fromRank, self.replica)[static_cast<size_t>(self.index % senders)];
    Instruction recv;
    recv.op = Opcode::kRecv;
    recv.stream = ir::Stream::kComm;
    recv.peer = peer;
    if (senders == receivers) {
      recv.bytes = bytes;
      BufferId id = incomingBuffer(self.replica, to, mb, self.index, direction, self.device, bytes, whole);
      emit(self.device, recv, {}, {id});
      return id;
    }
    recv.bytes = share(bytes, self.index, receivers);
    BufferId tile = incomingBuffer(self.replica, to, mb, self.index, direction, self.device,
                                   recv.bytes, BufferRole::kTile);
    emit(self.device, recv, {}, {tile});
    if (receivers == 1) return tile;
    BufferId gathered = program_.addBuffer(self.device, bytes, whole);
    Instruction gather;
    gather.op = Opcode::kAllGather;
    gather.stream = ir::Stream::kComm;
    gather.peer = group(meshOf(self.rank, self.replica));
    gather.bytes = bytes;
    emit(self.device, gather, {tile}, {gathered});
    emitFree(self.device, tile);
    return gathered;
  }

  /// Sends `buffer` (flowing from `from` into `to`) from `self`; frees it unless it
  /// is handed over on the same rank.
  void send(const Place& self, int from, int to, int mb, Direction direction, BufferId buffer,
            int64_t bytes) {
    const int toRank = rankOf(to);
    if (toRank == self.rank) return;  // handed over: the receiver frees it
    const int senders = meshSize(self.rank);
    const int receivers = meshSize(toRank);
    const std::vector<int>& mesh = meshOf(toRank, self.replica);
    const BufferRole whole = direction == kActivation ? BufferRole::kActivationIn : BufferRole::kGradIn;
    for (int i = self.index; i < receivers; i += senders) {
      if (senders == receivers && i != self.index) break;
      const bool tiled = senders != receivers;
      Instruction out;
      out.op = Opcode::kSend;
      out.stream = ir::Stream::kComm;
      out.peer = mesh[static_cast<size_t>(i)];
      out.bytes = tiled ? share(bytes, i, receivers) : bytes;
      out.target = incomingBuffer(self.replica, to, mb, i, direction, out.peer, out.bytes,
                                  tiled ? BufferRole::kTile : whole);
      emit(self.device, out, {buffer}, {});
      if (!tiled) break;
    }
    emitFree(self.device, buffer);
  }

  /// The output buffer of work on `from` flowing into `to`: handed over in place when
  /// `to` is on the same rank, else a fresh buffer to send.
  BufferId outgoing(const Place& self, int to, int mb, Direction direction, int64_t bytes,
                    BufferRole role) {
    if (rankOf(to) == self.rank) {
      return incomingBuffer(self.replica, to, mb, self.index, direction, self.device, bytes, role);
    }
    return program_.addBuffer(self.device, bytes, role);
  }

  // --- one device --------------------------------------------------------------

  void lowerDevice(const Place& self) {
    const StageDescription& stage = stageOf(self.rank);
    const std::vector<ir::Action>& actions = schedule_.ranks[static_cast<size_t>(self.rank)];
    std::vector<size_t> lastBackward(static_cast<size_t>(chunks()), actions.size());
    for (size_t i = 0; i < actions.size(); ++i) {
      const ActionKind kind = actions[i].kind;
      if (kind == ActionKind::kBackward || kind == ActionKind::kWeightGrad) {
        lastBackward[static_cast<size_t>(actions[i].chunk)] = i;
      }
    }
    stashes_.assign(static_cast<size_t>(microbatches_) * chunks(), kNoBuffer);
    rebuilt_.assign(stashes_.size(), kNoBuffer);
    buckets_.clear();
    for (size_t i = 0; i < actions.size(); ++i) {
      const ir::Action& action = actions[i];
      const bool last = lastBackward[static_cast<size_t>(action.chunk)] == i;
      switch (action.kind) {
        case ActionKind::kForward:
          lowerForward(self, action);
          break;
        case ActionKind::kBackward:
        case ActionKind::kInputGrad:
          lowerBackward(self, action, last);
          break;
        case ActionKind::kWeightGrad:
          lowerWeightGrad(self, action, last);
          break;
        case ActionKind::kRecompute:  // schedules never contain it
          throw LoweringError("a schedule action cannot be R; lowering adds recomputation itself");
      }
    }
    lowerUpdate(self, stage);
  }

  BufferId& stash(int mb, int chunk) {
    return stashes_[static_cast<size_t>(mb) * chunks() + chunk];
  }
  BufferId& rebuilt(int mb, int chunk) {
    return rebuilt_[static_cast<size_t>(mb) * chunks() + chunk];
  }

  /// A recomputing rank's RUN R before the backward of (microbatch, chunk): it
  /// reads the stash the forward kept and defines the activations it rebuilds.
  void lowerRecompute(const Place& self, const ir::Action& action, int vs) {
    const StageDescription& stage = stageOf(self.rank);
    const int mb = action.microbatch;
    BufferId& out = rebuilt(mb, action.chunk);
    out = program_.addBuffer(self.device, share(stage.recomputeBytes, action.chunk, chunks()),
                             BufferRole::kStash);
    ir::Action recompute = action;
    recompute.kind = ActionKind::kRecompute;
    emit(self.device, runOf(recompute, vs, stage.recomputeSeconds / chunks()), {stash(mb, action.chunk)},
         {out});
  }

  Instruction runOf(const ir::Action& action, int vs, double cost) const {
    Instruction in;
    in.op = Opcode::kRun;
    in.action = action.kind;
    in.chunk = static_cast<uint8_t>(action.chunk);
    in.stage = vs;
    in.microbatch = action.microbatch;
    in.cost = cost;
    return in;
  }

  void lowerForward(const Place& self, const ir::Action& action) {
    const StageDescription& stage = stageOf(self.rank);
    const int vs = schedule_.virtualStage(self.rank, action.chunk);
    const int mb = action.microbatch;
    BufferId in = kNoBuffer;
    if (vs > 0) {
      in = receive(self, vs, vs - 1, mb, kActivation, stageOf(rankOf(vs - 1)).activationBytes);
    }
    BufferId& held = stash(mb, action.chunk);
    held = program_.addBuffer(self.device, share(stage.heldActivationBytes, action.chunk, chunks()),
                              BufferRole::kStash);
    BufferId out = kNoBuffer;
    if (vs + 1 < virtualStages_) {
      out = outgoing(self, vs + 1, mb, kActivation, stage.activationBytes, BufferRole::kActivationOut);
    }
    emit(self.device, runOf(action, vs, stage.forwardSeconds / chunks()), {in}, {held, out});
    if (in != kNoBuffer) emitFree(self.device, in);
    if (out != kNoBuffer) send(self, vs, vs + 1, mb, kActivation, out, stage.activationBytes);
  }

  void lowerBackward(const Place& self, const ir::Action& action, bool last) {
    const StageDescription& stage = stageOf(self.rank);
    const int vs = schedule_.virtualStage(self.rank, action.chunk);
    const int mb = action.microbatch;
    BufferId in = kNoBuffer;
    if (vs + 1 < virtualStages_) {
      in = receive(self, vs, vs + 1, mb, kGradient, stage.activationBytes);
    }
    BufferId out = kNoBuffer;
    int64_t outBytes = 0;
    if (vs > 0) {
      outBytes = stageOf(rankOf(vs - 1)).activationBytes;
      out = outgoing(self, vs - 1, mb, kGradient, outBytes, BufferRole::kGradOut);
    }
    const bool whole = action.kind == ActionKind::kBackward;
    const double cost =
        ((whole ? stage.backwardSeconds : stage.backwardSeconds - stage.weightGradSeconds) -
         (stage.recompute ? stage.recomputeSeconds : 0)) /
        chunks();
    if (stage.recompute) lowerRecompute(self, action, vs);
    BufferId held = stash(mb, action.chunk);
    BufferId again = stage.recompute ? rebuilt(mb, action.chunk) : kNoBuffer;
    auto handOff = [&] {
      if (in != kNoBuffer) emitFree(self.device, in);
      if (whole) emitFree(self.device, held);
      if (whole && again != kNoBuffer) emitFree(self.device, again);
      if (out != kNoBuffer) send(self, vs, vs - 1, mb, kGradient, out, outBytes);
    };
    if (whole && last) {
      emitPieces(self, action, vs, cost, {held, again, in}, out, handOff);
    } else {
      emit(self.device, runOf(action, vs, cost), {held, again, in}, {out});
      handOff();
    }
  }

  void lowerWeightGrad(const Place& self, const ir::Action& action, bool last) {
    const StageDescription& stage = stageOf(self.rank);
    const int vs = schedule_.virtualStage(self.rank, action.chunk);
    const double cost = stage.weightGradSeconds / chunks();
    BufferId held = stash(action.microbatch, action.chunk);
    BufferId again = stage.recompute ? rebuilt(action.microbatch, action.chunk) : kNoBuffer;
    if (last) {
      emitPieces(self, action, vs, cost, {held, again, kNoBuffer}, kNoBuffer, [] {});
    } else {
      emit(self.device, runOf(action, vs, cost), {held, again}, {});
    }
    emitFree(self.device, held);
    if (again != kNoBuffer) emitFree(self.device, again);
  }

  /// The chunk's last backward, one piece per gradient bucket; each piece finalises
  /// its bucket, which is all-reduced across replicas at once. The last piece also
  /// produces `out`, the input gradient, which backward computes last;
  /// `afterLastPiece` (which sends it on) is emitted before the last bucket's
  /// all-reduce. The simulator overlaps the two on their own streams either way,
  /// but a backend that runs a device's instructions in order (the cpu runtime)
  /// would hold the previous stage's last backward behind the other replicas.
  template <class AfterLastPiece>
  void emitPieces(const Place& self, const ir::Action& action, int vs, double cost,
                  std::array<BufferId, 3> uses, BufferId out, AfterLastPiece afterLastPiece) {
    const StageDescription& stage = stageOf(self.rank);
    const int64_t chunkGradient = share(stage.gradientBytes, action.chunk, chunks());
    // Without replicas there is nothing to overlap: one piece finalises every gradient.
    int parts = 1;
    if (chunkGradient > 0 && replicas_ > 1) {
      const int64_t wanted = (chunkGradient + d_.bucketBytes - 1) / d_.bucketBytes;
      parts = static_cast<int>(std::min<int64_t>(wanted, PipelineDescription::kMaxBuckets));
    }
    const int dpGroup = replicas_ > 1 ? replicaGroup(self.rank, self.index) : -1;
    for (int part = 0; part < parts; ++part) {
      BufferId bucket = kNoBuffer;
      if (chunkGradient > 0) {
        bucket = program_.addBuffer(self.device, share(chunkGradient, part, parts),
                                    BufferRole::kGradient);
        buckets_.push_back(bucket);
      }
      Instruction run = runOf(action, vs, cost / parts);
      run.part = static_cast<uint16_t>(part);
      run.parts = static_cast<uint16_t>(parts);
      emit(self.device, run, {uses[0], uses[1], uses[2]},
           {bucket, part + 1 == parts ? out : kNoBuffer});
      if (part + 1 == parts) afterLastPiece();
      if (bucket == kNoBuffer || dpGroup < 0) continue;
      // Sharded optimizer state: each replica keeps only its shard of the sum.
      Instruction reduce;
      reduce.op = stage.shardOptimizer ? Opcode::kReduceScatter : Opcode::kAllReduce;
      reduce.stream = ir::Stream::kGrad;
      reduce.peer = dpGroup;
      reduce.bytes = program_.buffers[bucket].bytes;
      emit(self.device, reduce, {bucket}, {bucket});
    }
  }

  void lowerUpdate(const Place& self, const StageDescription& stage) {
    BufferId parameters = program_.addBuffer(self.device, stage.parameterBytes, BufferRole::kParameters);
    Instruction update;
    update.op = Opcode::kUpdate;
    update.stage = self.rank;
    update.cost = stage.updateSeconds;
    if (!buckets_.empty()) syncInsideMesh(self, stage, buckets_.back());
    std::vector<BufferId> uses = buckets_;
    uses.push_back(parameters);
    const BufferId defs[] = {parameters};
    program_.append(self.device, update, uses, defs);
    if (stage.shardOptimizer && replicas_ > 1) gatherParameters(self, stage, parameters);
  }

  /// The gradients the mesh's strategies leave partial, summed inside the mesh
  /// before the update (StageDescription::meshSyncs); the all-reduce rides on
  /// the last bucket so that the UPDATE, which uses it, waits for it.
  void syncInsideMesh(const Place& self, const StageDescription& stage, BufferId bucket) {
    const std::vector<int>& mesh = meshOf(self.rank, self.replica);
    for (const MeshGradientSync& sync : stage.meshSyncs) {
      if (sync.members < 2 || sync.bytes <= 0) continue;
      const int position = (self.index / sync.stride) % sync.members;
      const int base = self.index - position * sync.stride;
      std::vector<int> members;
      for (int k = 0; k < sync.members; ++k) {
        const int at = base + k * sync.stride;
        if (at < 0 || at >= static_cast<int>(mesh.size()))
          throw LoweringError(
              fmt::format("a gradient sync group of stride {} and {} members does not fit "
                          "a mesh of {} devices",
                          sync.stride, sync.members, mesh.size()));
        members.push_back(mesh[static_cast<size_t>(at)]);
      }
      Instruction reduce;
      reduce.op = Opcode::kAllReduce;
      reduce.stream = ir::Stream::kGrad;
      reduce.peer = group(std::move(members));
      reduce.bytes = sync.bytes;
      emit(self.device, reduce, {bucket}, {bucket});
    }
  }

  /// After a sharded update each replica holds only its shard of the updated
  /// parameters; the next step's forward needs all of them, so they are
  /// gathered in place over the replicas (on the grad stream, like the
  /// reduce-scatter it mirrors).
  void gatherParameters(const Place& self, const StageDescription& stage, BufferId parameters) {
    Instruction gather;
    gather.op = Opcode::kAllGather;
    gather.stream = ir::Stream::kGrad;
    gather.peer = replicaGroup(self.rank, self.index);
    gather.bytes = stage.gradientBytes;
    const BufferId operand[] = {parameters};
    program_.append(self.device, gather, operand, operand);
  }

  const PipelineDescription& d_;
  ir::PipelineSchedule schedule_;
  ir::Program program_;
  int replicas_;
  int virtualStages_;
  int microbatches_;
  int maxMesh_ = 1;
  std::vector<BufferId> incoming_;
  std::map<std::vector<int>, int> groups_;
  // Per device being lowered: the stash of each (microbatch, chunk), the gradient buckets.
  std::vector<BufferId> stashes_;
  std::vector<BufferId> rebuilt_;  // what RUN R rebuilt, by (microbatch, chunk)
  std::vector<BufferId> buckets_;
  std::vector<CodeSize> sizes_;  // per rank
};

}  // namespace

ir::Program lowerPipeline(const PipelineDescription& description) {
  requireValid(description);
  const int devices = countDevices(description);
  ir::PipelineSchedule schedule =
      buildSchedule({description.schedule, static_cast<int>(description.stages.size()),
                     description.microbatches, description.chunks, description.groupSize});
  if (schedule.splitsBackward()) {
    for (size_t s = 0; s < description.stages.size(); ++s) {
      const StageDescription& stage = description.stages[s];
      if (stage.weightGradSeconds > stage.backwardSeconds) {
        throw LoweringError(fmt::format(
            "stage {}: weightGradSeconds exceeds backwardSeconds; the backward is I + W", s));
      }
      if (stage.recomputeSeconds > stage.backwardSeconds - stage.weightGradSeconds) {
        throw LoweringError(fmt::format(
            "stage {}: recomputeSeconds exceeds the input-gradient part of backwardSeconds (R runs before I)", s));
      }
    }
  }
  return Lowerer(description, std::move(schedule), devices).run();
}

}  // namespace meshflow::passes
