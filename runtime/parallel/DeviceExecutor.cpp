#include "runtime/parallel/DeviceExecutor.h"

#include "runtime/KernelBackend.h"
#include "runtime/parallel/FlatShards.h"
#include "runtime/parallel/Messages.h"
#include "runtime/parallel/OptimizerStep.h"
#include "runtime/parallel/Tiles.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <set>
#include <utility>

namespace meshflow::runtime {
namespace {

using ir::BufferId;
using ir::BufferRole;
using ir::Instruction;

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// The values `ids` of `values` in a table of their own: copied when `alsoKept`
/// (sorted) holds them too, moved out otherwise.
ValueTable take(ValueTable& values, const std::vector<ir::ValueId>& ids,
                const std::vector<ir::ValueId>& alsoKept = {}) {
  ValueTable picked;
  for (ir::ValueId v : ids) {
    auto it = values.find(v);
    if (it == values.end()) throw std::logic_error(fmt::format("value {} was not computed", v));
    bool copy = std::binary_search(alsoKept.begin(), alsoKept.end(), v);
    picked.emplace(v, copy ? it->second : std::move(it->second));
  }
  return picked;
}

void mergeInto(ValueTable& into, ValueTable&& from) {
  for (auto& [v, t] : from) into.insert_or_assign(v, std::move(t));
}

std::vector<ir::ValueId> sortedUnion(const std::vector<ir::ValueId>& a, const std::vector<ir::ValueId>& b) {
  std::vector<ir::ValueId> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// sum += x, in place, on the thread's kernels (a GPU's memory stays there):
// the same fp32 adds as an element loop.
void addInto(Tensor& sum, const Tensor& x) {
  if (sum.shape() != x.shape() || sum.dtype() != ir::DType::F32 || x.dtype() != ir::DType::F32)
    throw std::logic_error(fmt::format("gradients of different types: {} and {}", sum.typeText(), x.typeText()));
  ir::Op add;
  add.kind = ir::OpKind::Add;
  std::vector<const Tensor*> in{&sum, &x};
  std::vector<Tensor*> out{&sum};
  runtime::runKernel(add, in, out, {});
}

class DeviceRun {
 public:
  explicit DeviceRun(const DeviceStep& s)
      : s_(s), code_(s.program->devices.at(static_cast<std::size_t>(s.device))) {}

  DeviceResult run() {
    auto start = Clock::now();
    MemoryScope device(s_.memory, MemoryCategory::kActivations);
    for (std::size_t i = 0; i < code_.code.size(); ++i) {
      const Instruction& in = code_.code[i];
      try {
        if (s_.fault && s_.fault->device == s_.device && s_.fault->step == s_.step &&
            s_.fault->instruction == i)
          throw std::runtime_error("injected fault");
        // A computation starts once it has a core: the timeline leaves out the wait.
        const double waited = result_.times.coreWaitSeconds;
        const double begin = secondsSince(s_.origin);
        execute(in);
        if (in.op != ir::Opcode::kFree)
          result_.times.timeline.push_back({static_cast<std::uint32_t>(i),
                                            begin + result_.times.coreWaitSeconds - waited,
                                            secondsSince(s_.origin)});
      } catch (const CommError& e) {
        // A consequence of another device's failure: that one is the error to report.
        if (e.kind() == CommError::Kind::Aborted) throw;
        throw failure(i, e.detail());
      } catch (const std::exception& e) {
        throw failure(i, e.what());
      }
    }
    if (!pending_.empty()) throw std::logic_error("an all-reduce was started and never used");
    result_.times.totalSeconds = secondsSince(start);
    return result_;
  }

 private:
  DeviceExecutionError failure(std::size_t i, const std::string& cause) const {
    return DeviceExecutionError(fmt::format("device {}, step {}, instruction {} ({}): {}", s_.device, s_.step, i,
                                            ir::instructionText(*s_.program, s_.device, code_.code[i]), cause));
  }

  const passes::StagePiece& piece(int vs) const {
    return s_.partition->stages.at(static_cast<std::size_t>(vs));
  }
  BufferRole role(BufferId id) const { return s_.program->buffers.at(id).role; }

  // The category of what an instruction allocates: RUNs make activations (the
  // gradients they accumulate are recharged), the optimizer step gradients
  // (scaled or resharded copies: it updates the state in place), transfers and
  // collectives communication — except those that define an activation
  // buffer, whose tensors the device keeps as activations.
  static MemoryCategory categoryOf(const Instruction& in) {
    switch (in.op) {
      case ir::Opcode::kUpdate: return MemoryCategory::kGradients;
      case ir::Opcode::kRun:
      case ir::Opcode::kRecv:
      case ir::Opcode::kAllGather: return MemoryCategory::kActivations;
      default: return MemoryCategory::kCommunication;
    }
  }

  // A received buffer is this device's from now on (the sender allocated it).
  void adopt(ValueTable& table, BufferId buffer) {
    if (!s_.memory) return;
    const MemoryCategory category =
        role(buffer) == BufferRole::kTile ? MemoryCategory::kCommunication : MemoryCategory::kActivations;
    for (auto& [v, t] : table) t.moveInto(s_.memory, category);
  }

  // Waits for the all-reduce under way on `buffer`, if any.
  void finishPending(BufferId buffer) {
    auto it = pending_.find(buffer);
    if (it == pending_.end()) return;
    auto start = Clock::now();
    {
      MemoryScope communication(MemoryCategory::kCommunication);
      it->second->finish();
    }
    for (auto& [v, t] : buffers_[buffer]) t.chargeTo(MemoryCategory::kGradients);
    result_.times.commSeconds += secondsSince(start);
    pending_.erase(it);
  }

  void execute(const Instruction& in) {
    auto uses = code_.uses(in);
    auto defs = code_.defs(in);
    for (BufferId u : uses) finishPending(u);
    MemoryScope category(categoryOf(in));
    switch (in.op) {
      case ir::Opcode::kRun:
        onCore([&] { runStage(in, uses, defs); });
        return;
      case ir::Opcode::kSend: {
        auto start = Clock::now();
        s_.comm->send(in.peer, in.target, encodeMessage(outgoing(in, uses[0]), held_));
        result_.times.commSeconds += secondsSince(start);
        return;
      }
      case ir::Opcode::kRecv: {
        auto start = Clock::now();
        buffers_[defs[0]] = decodeMessage(s_.comm->recv(in.peer, defs[0]), held_);
        adopt(buffers_[defs[0]], defs[0]);
        result_.times.commSeconds += secondsSince(start);
        return;
      }
      case ir::Opcode::kAllReduce: {
        // Asynchronous, as the grad stream's collectives are: the device goes
        // on with its backward, and the first instruction that uses the
        // bucket (the UPDATE) waits for the sum.
        std::vector<Tensor*> tensors;
        for (auto& [v, t] : buffers_[uses[0]]) tensors.push_back(&t);
        auto start = Clock::now();
        pending_[uses[0]] = s_.comm->startAllReduce(s_.program->groups.at(static_cast<std::size_t>(in.peer)), tensors);
        result_.times.commSeconds += secondsSince(start);
        return;
      }
      case ir::Opcode::kReduceScatter:
        reduceScatterBucket(in, uses[0]);
        return;
      case ir::Opcode::kAllGather: {
        if (role(uses[0]) == BufferRole::kParameters) {
          gatherParameters(in);
          return;
        }
        auto start = Clock::now();
        buffers_[defs[0]] = gatherTiles(std::move(buffers_[uses[0]]),
                                        s_.program->groups.at(static_cast<std::size_t>(in.peer)), *s_.comm,
                                        [this](ir::ValueId v) -> const Shape& { return s_.runner->shape(v); });
        result_.times.commSeconds += secondsSince(start);
        return;
      }
      case ir::Opcode::kFree:
        buffers_.erase(uses[0]);
        return;
      case ir::Opcode::kUpdate:
        onCore([&] { update(uses); });
        return;
      default:
        throw std::runtime_error(
            fmt::format("the cpu runtime cannot run {} instructions yet", ir::opcodeName(in.op)));
    }
  }

  // A sharded optimizer's gradient synchronisation: the bucket's gradients are
  // summed over the replicas, and this replica keeps its flat shard of each
  // (FlatShards.h), all in one collective. On a mesh each gradient is first
  // brought into its parameter's layout: the shard is of the box the
  // parameter is held in, which the update reads.
  void reduceScatterBucket(const Instruction& in, BufferId buffer) {
    const std::vector<int>& group = s_.program->groups.at(static_cast<std::size_t>(in.peer));
    if (group.at(static_cast<std::size_t>(s_.replica)) != s_.device)
      throw std::logic_error("a reduce-scatter group that is not in replica order");
    ValueTable& bucket = buffers_.at(buffer);
    if (bucket.empty()) return;  // every replica's piece of this stage has the same (no) gradients
    auto start = Clock::now();
    if (s_.spmd) {
      MemoryScope category(MemoryCategory::kGradients);
      for (auto& [g, t] : bucket) t = inParameterLayout(g, std::move(t));
    }
    std::vector<const Tensor*> tensors;
    std::vector<std::int64_t> elements;
    for (const auto& [g, t] : bucket) {
      tensors.push_back(&t);
      elements.push_back(t.elements());
    }
    Tensor row;
    s_.comm->reduceScatter(group, packParts(tensors, s_.replicas), row);
    MemoryScope category(MemoryCategory::kGradients);
    std::vector<Tensor> parts = unpackRow(row, elements, s_.replicas);
    std::size_t k = 0;
    for (auto& [g, t] : bucket) t = std::move(parts[k++]);
    result_.times.commSeconds += secondsSince(start);
  }

  // Gradient `g`'s boxes resharded within the mesh to its parameter's held
  // layout (a partial sum is reduced here, once per step).
  Tensor inParameterLayout(ir::ValueId g, Tensor boxes) {
    auto it = gradientSpecs_.find(g);
    const ir::ShardingSpec from = it != gradientSpecs_.end() ? it->second : ir::ShardingSpec::replicated(boxes.rank());
    const ir::ShardingSpec to = s_.spmd->heldSpec(parameterOf(g));
    if (from == to) return boxes;
    gradientSpecs_.insert_or_assign(g, to);
    return reshard(boxes, s_.spmd->shape(g), from, to, s_.mesh, *s_.comm);
  }

  // The parameter whose gradient `g` is, among the stages this device ran.
  ir::ValueId parameterOf(ir::ValueId g) const {
    for (int vs : stages_) {
      const passes::StagePiece& p = piece(vs);
      auto it = std::find(p.gradients.begin(), p.gradients.end(), g);
      if (it != p.gradients.end()) return p.gradientParameters[static_cast<std::size_t>(it - p.gradients.begin())];
    }
    throw std::logic_error(fmt::format("the gradient value {} belongs to no stage of this device", g));
  }

  // After a sharded update: every replica's updated shards of the parameters,
  // gathered in one collective and made whole (boxes on a mesh) in the state.
  void gatherParameters(const Instruction& in) {
    if (updatedShards_.empty()) return;  // every replica has the same (no) parameters
    std::vector<const Tensor*> parts;
    for (const auto& [name, part] : updatedShards_) parts.push_back(&part);
    Tensor gathered;
    MemoryScope communication(MemoryCategory::kCommunication);
    auto start = Clock::now();
    s_.comm->allGather(s_.program->groups.at(static_cast<std::size_t>(in.peer)), packRow(parts), gathered);
    result_.times.commSeconds += secondsSince(start);
    MemoryScope category(MemoryCategory::kParameters);
    std::int64_t offset = 0;
    for (const auto& [name, part] : updatedShards_) {
      Tensor& held = s_.state->at(name);
      held = unpackWhole(gathered, offset, held.shape(), s_.replicas);
      offset += part.elements();
    }
    updatedShards_.clear();
    roundMasters(s_, stages_);
  }

  // Runs a compute instruction once it is this device's turn on the host's
  // cores: devices that waited for a core go first (CoreGate::takeTurn).
  template <class Compute>
  void onCore(Compute compute) {
    if (s_.cores) {
      auto start = Clock::now();
      s_.cores->takeTurn(s_.device);
      result_.times.coreWaitSeconds += secondsSince(start);
    }
    compute();
  }

  // What a SEND carries: the buffer itself, or for a receiver on a mesh of
  // another size its tile of it (the buffer stays for the other tiles' SENDs).
  ValueTable outgoing(const Instruction& send, BufferId buffer) {
    if (role(send.target) != BufferRole::kTile) return std::move(buffers_[buffer]);
    const MeshMember& receiver = s_.members->at(static_cast<std::size_t>(send.peer));
    return tileOf(buffers_.at(buffer), receiver.index, receiver.size);
  }

  void runStage(const Instruction& in, std::span<const BufferId> uses, std::span<const BufferId> defs) {
    stages_.insert(in.stage);
    if (in.action == ir::ActionKind::kForward) {
      forward(in, uses, defs);
      return;
    }
    if (in.action == ir::ActionKind::kRecompute) {
      recompute(in, uses, defs);
      return;
    }
    if (in.part == 0) backward(in, uses);
    for (BufferId d : defs) {
      if (role(d) == BufferRole::kGradOut) buffers_[d] = std::move(pendingOut_);
      if (role(d) == BufferRole::kGradient) buffers_[d] = bucket(in.stage, in.part, in.parts);
    }
  }

  // Where a RUN counts the choices its moe_dispatch ops drop: a forward only
  // (a recomputing rerun routes the same tokens again).
  double* moeDropped(ir::ActionKind action) {
    return action == ir::ActionKind::kForward ? &result_.moeDropped : nullptr;
  }

  void runOps(const std::vector<ir::OpId>& ops, ValueTable& values, const TensorMap& inputs,
              const ReleasePlan* releases, ir::ActionKind action) {
    auto start = Clock::now();
    s_.runner->run(ops, values, *s_.state, inputs, s_.step, releases, sample_, moeDropped(action));
    result_.times.kernelSeconds += secondsSince(start);
  }

  // A RUN's ops of stage `vs`; on a mesh of several devices SPMD. The values
  // that outlive the RUN stay in their layouts (held_) — the weight gradients
  // in gradients_ until the update —, except the loss and, unless the step's
  // meshes all share one shape, the carries to other stages: those are made
  // whole, by every member in the same (sorted) order.
  void runStageOps(const std::vector<ir::OpId>& ops, ValueTable& values, const TensorMap& inputs, int vs,
                   ir::ActionKind action) {
    const ReleasePlan* releases =
        s_.releases ? &s_.releases->at(static_cast<std::size_t>(vs))[static_cast<std::size_t>(action)] : nullptr;
    if (!s_.spmd) return runOps(ops, values, inputs, releases, action);
    const bool forward = action == ir::ActionKind::kForward || action == ir::ActionKind::kRecompute;
    auto start = Clock::now();
    ShardedValues sharded;
    for (auto& [v, t] : values) {
      auto it = held_.find(v);
      std::size_t rank = t.rank();
      sharded.emplace(v, ShardedValue{std::move(t), it != held_.end() ? it->second : ir::ShardingSpec::replicated(rank)});
    }
    values.clear();
    s_.spmd->run(ops, sharded, *s_.state, inputs, s_.step, s_.mesh, *s_.comm, releases, sample_,
                 moeDropped(action));
    const passes::StagePiece& p = piece(vs);
    if (!forward)
      for (ir::ValueId g : p.gradients)
        if (auto it = sharded.find(g); it != sharded.end()) gradients_.insert_or_assign(g, it->second);
    // R leaves what it rebuilds in the layouts F left it: held_ knows one
    // layout per value.
    const std::vector<ir::ValueId>& carry = forward ? p.forwardCarry : p.backwardCarry;
    const std::vector<ir::ValueId> kept =
        action == ir::ActionKind::kRecompute ? handedOn(*s_.partition, recomputationOf(vs), vs, action)
                                             : outliving(vs, forward, !forward);
    for (ir::ValueId v : kept) {
      auto it = sharded.find(v);
      if (it == sharded.end()) continue;
      ShardedValue& sv = it->second;
      const bool whole = (forward && v == s_.partition->loss) ||
                         (!s_.shardedCarries && std::find(carry.begin(), carry.end(), v) != carry.end());
      if (sv.spec.isReplicated() || !whole) {
        if (sv.spec.isReplicated()) held_.erase(v);
        else held_.insert_or_assign(v, sv.spec);
        values.emplace(v, std::move(sv.local));
      } else {
        values.emplace(v, s_.spmd->whole(v, sharded, s_.mesh, *s_.comm));
        held_.erase(v);
      }
    }
    result_.times.kernelSeconds += secondsSince(start);
  }

  // What a forward (carry, stash, the loss) or backward (carry, stash, what W
  // reads, and unless `withoutGradients` the gradients) RUN of stage `vs`
  // leaves behind, sorted.
  std::vector<ir::ValueId> outliving(int vs, bool forward, bool withoutGradients = false) const {
    const passes::StagePiece& p = piece(vs);
    if (forward) return handedOn(*s_.partition, recomputationOf(vs), vs, ir::ActionKind::kForward);
    if (withoutGradients) return sortedUnion(sortedUnion(p.backwardCarry, p.stash), p.inputGradOutputs);
    return handedOn(*s_.partition, recomputationOf(vs), vs, ir::ActionKind::kInputGrad);
  }

  const passes::StageRecomputation& recomputationOf(int vs) const {
    static const passes::StageRecomputation kNone;
    return s_.recomputation ? s_.recomputation->at(static_cast<std::size_t>(vs)) : kNone;
  }

  // What stage `vs`'s forward keeps for its backward: its stash, or with
  // recomputation the part the RUN R before the backward rebuilds from.
  const std::vector<ir::ValueId>& stashOf(int vs) const {
    return s_.recomputation ? recomputationOf(vs).kept : piece(vs).stash;
  }

  // The graph inputs of `in`'s microbatch; also notes where it starts in the batch.
  const TensorMap& inputsOf(const Instruction& in) {
    sample_ = s_.firstSample + in.microbatch * s_.microbatchSize;
    return s_.microbatches->at(static_cast<std::size_t>(in.microbatch));
  }

  void forward(const Instruction& in, std::span<const BufferId> uses, std::span<const BufferId> defs) {
    const passes::StagePiece& p = piece(in.stage);
    ValueTable values;
    for (BufferId u : uses) mergeInto(values, std::move(buffers_[u]));
    runStageOps(p.forward, values, inputsOf(in), in.stage, in.action);
    if (in.stage == s_.partition->lossStage && s_.mesh.index == 0) {
      result_.lossSum += values.at(s_.partition->loss).item();
      ++result_.losses;
    }
    // The activation first: it copies what the stash keeps too, then the stash moves.
    const std::vector<ir::ValueId>& stash = stashOf(in.stage);
    for (BufferId d : defs)
      if (role(d) == BufferRole::kActivationOut) buffers_[d] = take(values, p.forwardCarry, stash);
    for (BufferId d : defs)
      if (role(d) == BufferRole::kStash) buffers_[d] = take(values, stash);
  }

  // R: reruns the layer the backward reads first, and leaves what it rebuilt
  // with everything the forward kept in the buffer it defines (the kept one is
  // spent); the backward reruns the other layers as it reaches them.
  void recompute(const Instruction& in, std::span<const BufferId> uses, std::span<const BufferId> defs) {
    ValueTable values;
    for (BufferId u : uses) mergeInto(values, std::move(buffers_[u]));
    runStageOps(recomputationOf(in.stage).rerun, values, inputsOf(in), in.stage, in.action);
    buffers_[defs[0]] = std::move(values);
  }

  // B, I or W of one microbatch: runs its ops, accumulates the weight gradients it
  // makes, and keeps the backward carry for the instruction's grad-out buffer.
  void backward(const Instruction& in, std::span<const BufferId> uses) {
    const passes::StagePiece& p = piece(in.stage);
    const bool inputGrad = in.action == ir::ActionKind::kInputGrad;
    ValueTable values;
    BufferId stash = 0;
    for (BufferId u : uses) {
      if (role(u) == BufferRole::kStash) stash = u;
      mergeInto(values, std::move(buffers_[u]));
    }
    runStageOps(opsOfRun(p, recomputationOf(in.stage), in.action), values, inputsOf(in), in.stage, in.action);
    accumulate(in.stage, in.action, values);
    if (!inputGrad) {
      if (in.action == ir::ActionKind::kBackward) pendingOut_ = take(values, p.backwardCarry);
      return;
    }
    // I hands the stash (all of it rebuilt, with recomputation), and what W
    // needs of its own results, back to the stash buffer.
    const std::vector<ir::ValueId> kept = sortedUnion(p.stash, p.inputGradOutputs);
    pendingOut_ = take(values, p.backwardCarry, kept);
    buffers_[stash] = take(values, kept);
  }

  // Adds the weight gradients this B, I or W step finished to the step's sums,
  // each in the layout its op left it (boxes of one layout add up: a partial
  // sum stays one).
  void accumulate(int vs, ir::ActionKind action, ValueTable& values) {
    const passes::StagePiece& p = piece(vs);
    auto& sums = accumulated_[vs];
    sums.resize(p.gradients.size());
    for (std::size_t i = 0; i < p.gradients.size(); ++i) {
      if (action == ir::ActionKind::kInputGrad && !p.gradientFromInputGrad[i]) continue;
      if (action == ir::ActionKind::kWeightGrad && p.gradientFromInputGrad[i]) continue;
      const ir::ValueId g = p.gradients[i];
      auto fresh = gradients_.find(g);
      const Tensor& made = fresh != gradients_.end() ? fresh->second.local : values.at(g);
      ir::ShardingSpec spec =
          fresh != gradients_.end() ? fresh->second.spec : ir::ShardingSpec::replicated(made.rank());
      auto [held, first] = gradientSpecs_.try_emplace(g, spec);
      if (held->second != spec)
        throw std::logic_error(fmt::format("the gradient value {} came as {} and as {}", g,
                                           held->second.toString(), spec.toString()));
      if (sums[i].allocated()) addInto(sums[i], made);
      else sums[i] = fresh != gradients_.end() ? std::move(fresh->second.local) : made;  // gradients_ is spent
      sums[i].chargeTo(MemoryCategory::kGradients);
    }
    gradients_.clear();
  }

  // Bucket `part` of `parts` of stage `vs`: a contiguous group of its gradients in
  // the order backward finishes them.
  ValueTable bucket(int vs, int part, int parts) {
    const passes::StagePiece& p = piece(vs);
    auto& sums = accumulated_[vs];
    sums.resize(p.gradients.size());
    std::size_t n = p.gradients.size();
    ValueTable table;
    for (std::size_t i = n * part / parts; i < n * (part + 1) / parts; ++i)
      table.emplace(p.gradients[i], std::exchange(sums[i], Tensor()));
    return table;
  }

  void update(std::span<const BufferId> uses) {
    ValueTable values;
    for (BufferId u : uses)
      if (role(u) == BufferRole::kGradient) mergeInto(values, std::move(buffers_[u]));
    for (int vs : stages_) {
      const passes::StagePiece& p = piece(vs);
      auto& sums = accumulated_[vs];
      for (std::size_t i = 0; i < sums.size(); ++i)
        if (sums[i].allocated()) values.insert_or_assign(p.gradients[i], std::exchange(sums[i], Tensor()));
    }
    DeviceTimes spent = runUpdate(s_, stages_, std::move(values), gradientSpecs_, &updatedShards_);
    result_.times.kernelSeconds += spent.kernelSeconds;
    result_.times.commSeconds += spent.commSeconds;
  }

  const DeviceStep& s_;
  const ir::DeviceCode& code_;
  std::map<BufferId, ValueTable> buffers_;
  std::map<int, std::vector<Tensor>> accumulated_;  // per virtual stage, per gradient: boxes
  std::map<ir::ValueId, ir::ShardingSpec> gradientSpecs_;  // the layout of each gradient's boxes
  ShardedValues gradients_;  // the weight gradients of the last SPMD backward RUN
  HeldSpecs held_;           // how the values in buffers are held (absent: whole)
  ValueTable pendingOut_;
  std::int64_t sample_ = 0;  // the first sample of the microbatch being run
  std::map<BufferId, std::unique_ptr<PendingAllReduce>> pending_;  // all-reduces under way, by bucket
  TensorMap updatedShards_;  // a sharded update's parameter shards, by name, until the ALL_GATHER
  std::set<int> stages_;
  DeviceResult result_;
};

}  // namespace

DeviceResult executeDevice(const DeviceStep& step) { return DeviceRun(step).run(); }

}  // namespace meshflow::runtime
