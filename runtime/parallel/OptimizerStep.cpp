#include "runtime/parallel/OptimizerStep.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "runtime/KernelBackend.h"
#include "runtime/parallel/FlatShards.h"
#include "runtime/parallel/OpRunner.h"

namespace meshflow::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Output j of an optimizer update replaces its input 0 (w), 3 or 4 (state).
std::size_t updatedInput(std::size_t output) { return output == 0 ? 0 : output + 2; }

// An update-phase Cast rounds a new fp32 master weight into the half
// parameter it replaces, the output of its forward op (passes/Autodiff.h).
std::optional<ir::ValueId> castTarget(const ir::Graph& graph, ir::OpId id) {
  const ir::Op& op = graph.op(id);
  if (op.kind != ir::OpKind::Cast || op.phase != ir::Phase::Update || !op.forwardOp) return std::nullopt;
  return graph.op(*op.forwardOp).outputs.at(0);
}

// The state values the outputs of a non-optimizer update op replace, in
// output order: a master weight's half copy, or the loss scale and its counts.
std::vector<ir::ValueId> replacedState(const ir::Graph& graph, ir::OpId id) {
  if (auto param = castTarget(graph, id)) return {*param};
  const ir::Op& op = graph.op(id);
  if (op.kind == ir::OpKind::LossScaleUpdate) return {op.inputs.at(0), op.inputs.at(1)};
  return {};
}

// An op of the update the runtime runs itself (no op of the graph): `kind`
// with one attribute.
ir::Op runtimeOp(ir::OpKind kind, const std::string& attribute, ir::Attribute value) {
  ir::Op op{kind, {}, {}, {}, "", {}, ir::Phase::Update, std::nullopt};
  op.attrs[attribute] = std::move(value);
  return op;
}

// `t` times `factor`, in place, on the calling thread's backend: a GPU's
// gradients stay on the GPU (a host loop would copy each one there and back).
void scaleInPlace(Tensor& t, float factor) {
  if (factor == 1.0f) return;
  std::vector<const Tensor*> in{&t};
  std::vector<Tensor*> out{&t};
  runtime::runKernel(runtimeOp(ir::OpKind::Scale, "factor", static_cast<double>(factor)), in, out,
                     cpu::KernelContext{});
}

// The sum of the squares of the elements of `tensors`: each tensor's in turn,
// added, on the host — or, where a backend other than the cpu kernels runs
// this thread's kernels (a GPU, whose gradients would cross to the host), one
// GlobalNorm op there that keeps the sum of squares (`squared`), rounded to
// f32 as the all-reduce that follows rounds it anyway.
double sumOfSquares(const std::vector<const Tensor*>& tensors) {
  if (KernelScope::current() == nullptr) {
    double squares = 0;
    for (const Tensor* t : tensors) {
      double own = 0;
      for (float x : t->f32()) own += static_cast<double>(x) * x;
      squares += own;
    }
    return squares;
  }
  if (tensors.empty()) return 0;
  Tensor sum;
  std::vector<Tensor*> out{&sum};
  runtime::runKernel(runtimeOp(ir::OpKind::GlobalNorm, "squared", std::int64_t{1}), tensors, out,
                     cpu::KernelContext{});
  settleKernels();  // the host reads the sum
  return sum.item();
}

class UpdateRun {
 public:
  UpdateRun(const DeviceStep& s, const std::set<int>& stages, const std::map<ir::ValueId, ir::ShardingSpec>& specs,
            TensorMap* updatedShards)
      : s_(s), stages_(stages), specs_(specs), updatedShards_(updatedShards) {}

  // The update's ops stay in flight (a GPU keeps them queued) until it
  // returns; the host waits for them only where it reads what they wrote
  // (the gradient norm) and a reshard before it hands boxes on.
  DeviceTimes run(ValueTable values) {
    KernelBatch batch;
    update(std::move(values));
    batch.finish();
    return times_;
  }

 private:
  void update(ValueTable values) {
    for (int vs : stages_)
      for (ir::ValueId g : piece(vs).gradients) {
        auto it = values.find(g);
        if (it == values.end() || !it->second.allocated())
          throw std::logic_error(fmt::format("the gradient value {} of stage {} is missing", g, vs));
        scaleInPlace(it->second, s_.gradientScale);
      }
    if (s_.shardOptimizer) return updateFlat(values);
    if (s_.spmd) return updateSharded(values);
    if (s_.partition->clip) values[clipScaleValue()] = clipScale(gradientSquares(values));
    applyUpdate(values);
  }

  const passes::StagePiece& piece(int vs) const { return s_.partition->stages.at(static_cast<std::size_t>(vs)); }

  // The sum of squares of this replica's whole gradients that this device
  // counts: on a 1 × 1 mesh, all of them.
  double gradientSquares(const ValueTable& values) const {
    std::vector<const Tensor*> counted;
    for (int vs : stages_)
      for (ir::ValueId g : piece(vs).gradients) {
        const Tensor& t = values.at(g);
        if (countsOnce(ir::ShardingSpec::replicated(t.rank()))) counted.push_back(&t);
      }
    return sumOfSquares(counted);
  }

  // This device's share of the loss scale in the all-reduce: the scale at
  // mesh coordinate (0, 0) of the stage that holds it, else 0.
  float heldLossScale(const ir::Graph& graph, const ir::Op& clip) const {
    auto it = s_.state->find(bindingName(graph, clip.inputs.at(1)));
    if (it == s_.state->end() || s_.mesh.row() != 0 || s_.mesh.column() != 0) return 0.0f;
    return std::as_const(it->second).f32()[0];
  }

  ir::ValueId clipScaleValue() const {
    return s_.runner->graph().op(s_.partition->clip->clipScale).outputs.at(0);
  }

  // The global gradient norm over every stage of this replica — the squares
  // this device counts, all-reduced over the replica's devices rank by rank —
  // and the clip scale the updates read.
  //
  // Under loss scaling the clip op also reads the loss scale, which only the
  // devices of the loss's stage hold: it travels in the same all-reduce, added
  // by one device of the replica (the others add 0, so the sum is exact).
  // Every device then sees the same norm, and a non-finite one — an overflow —
  // makes every device skip the step.
  Tensor clipScale(double squares) {
    const ir::Graph& graph = s_.runner->graph();
    const ir::Op& clip = graph.op(s_.partition->clip->clipScale);
    bool scaled = clip.inputs.size() == 2;
    // Over every replica (a sharded optimizer), replicas other than 0 hold the
    // same whole gradients, and the same loss scale.
    const bool counts = !s_.clipOverReplicas || s_.shardOptimizer || s_.replica == 0;
    const bool scaleHere = scaled && (!s_.clipOverReplicas || s_.replica == 0);
    Tensor total = Tensor::fromF32({2}, {counts ? static_cast<float>(squares) : 0.0f,
                                         scaleHere ? heldLossScale(graph, clip) : 0.0f});
    auto start = Clock::now();
    s_.comm->allReduce(*s_.replicaGroup, {&total});
    settleKernels();  // the host reads the sum, maybe made on the device's kernels
    times_.commSeconds += secondsSince(start);
    Tensor norm = Tensor::scalar(std::sqrt(total.f32()[0]));
    Tensor lossScale = Tensor::scalar(total.f32()[1]);
    Tensor scale;
    std::vector<const Tensor*> in{&norm};
    if (scaled) in.push_back(&lossScale);
    std::vector<Tensor*> out{&scale};
    s_.runner->runKernel(s_.partition->clip->clipScale, in, out, s_.optimizerStep);
    return scale;
  }

  // Runs the update ops of this device's stages in order, timed: each
  // optimizer op through `optimizer`, every other op (constants, a master
  // weight's rounding, the loss scaler) through `other`.
  template <class Optimizer, class Other>
  void runUpdateOps(Optimizer optimizer, Other other) {
    const ir::Graph& graph = s_.runner->graph();
    auto start = Clock::now();
    for (int vs : stages_)
      for (ir::OpId id : piece(vs).update) {
        const ir::OpKind kind = graph.op(id).kind;
        if (kind == ir::OpKind::SgdUpdate || kind == ir::OpKind::AdamUpdate) optimizer(id);
        else other(id);
      }
    times_.kernelSeconds += secondsSince(start);
  }

  // The update on one device. The optimizer ops write the parameters and their
  // state in place — their kernels read and write each element at one index —
  // so a step allocates no second copy of them (3 × the parameters' bytes at
  // the peak of every step).
  void applyUpdate(ValueTable& values) {
    runUpdateOps([&](ir::OpId id) { updateInPlace(id, values); }, [&](ir::OpId id) { runWhole(id, values); });
  }

  // A non-optimizer update op on whole tensors; what its outputs replace
  // (a half parameter, the loss scaler's state) goes to the state.
  void runWhole(ir::OpId id, ValueTable& values) {
    static const TensorMap kNoInputs;
    const ir::Graph& graph = s_.runner->graph();
    ir::OpId one[] = {id};
    s_.runner->run(one, values, *s_.state, kNoInputs, s_.optimizerStep);
    std::vector<ir::ValueId> replaced = replacedState(graph, id);
    for (std::size_t j = 0; j < replaced.size(); ++j)
      (*s_.state)[bindingName(graph, replaced[j])] = std::move(values.at(graph.op(id).outputs.at(j)));
  }

  // The state tensors optimizer op `id` writes (its outputs replace inputs 0,
  // 3 and 4), each first given storage of its own: a state tensor may share
  // its elements with another device's (replicas are set from one map), and a
  // kernel reading it through the input while its output write unshared it
  // would read elements the other device is updating in place at the same time.
  std::vector<Tensor*> updatedState(const ir::Op& op) {
    const ir::Graph& graph = s_.runner->graph();
    std::vector<Tensor*> out;
    for (std::size_t j = 0; j < op.outputs.size(); ++j) {
      Tensor& held = s_.state->at(bindingName(graph, op.inputs.at(updatedInput(j))));
      // Unshares where the kernel writes: f32() would make the host's copy the
      // current one, and a GPU's state would cross to the host and back. In
      // managed memory the host copies the elements, maybe into a block a
      // queued op still reads (KernelBatch): after the queued ops.
      if (held.sharesStorage()) settleKernels();
      (void)held.deviceData();
      out.push_back(&held);
    }
    return out;
  }

  // Runs optimizer op `id` with each output bound to the state tensor it
  // replaces, which it is also read as; the gradient is spent after it.
  void updateInPlace(ir::OpId id, ValueTable& values) {
    static const TensorMap kNoInputs;
    const ir::Op& op = s_.runner->graph().op(id);
    std::vector<Tensor*> out = updatedState(op);
    std::vector<const Tensor*> in;
    for (ir::ValueId v : op.inputs) in.push_back(&s_.runner->input(id, v, values, *s_.state, kNoInputs));
    for (std::size_t j = 0; j < out.size(); ++j)
      if (in.at(updatedInput(j)) != out[j]) throw std::logic_error("an optimizer state value is not in the state");
    s_.runner->runKernel(id, in, out, s_.optimizerStep);
    // What later update ops read (a master weight's rounding to its half
    // parameter): shares the state's elements, and dies with the step's values.
    for (std::size_t j = 0; j < out.size(); ++j) values.insert_or_assign(op.outputs[j], *out[j]);
    values.erase(op.inputs.at(1));
  }

  // The update on a mesh of several devices: every member updates its boxes of
  // the parameters and optimizer state in place, with each gradient brought
  // into its parameter's layout first (a partial sum is reduced there, once
  // per step); the other update ops (constants) run SPMD.
  void updateSharded(ValueTable& boxes) {
    ShardedValues values;
    for (auto& [g, box] : boxes) values.emplace(g, ShardedValue{std::move(box), specs_.at(g)});
    if (s_.partition->clip)
      values[clipScaleValue()] = ShardedValue{clipScale(shardedSquares(values)), ir::ShardingSpec::replicated(0)};
    static const TensorMap kNoInputs;
    runUpdateOps([&](ir::OpId id) { updateBoxesInPlace(id, values); },
                 [&](ir::OpId id) {
                   ir::OpId one[] = {id};
                   s_.spmd->run(one, values, *s_.state, kNoInputs, s_.optimizerStep, s_.mesh, *s_.comm);
                   writeBackSharded(id, values);
                 });
  }

  // An update op whose outputs replace state (a master weight rounded into its
  // half parameter, the loss scaler): its boxes, in the state's layouts.
  void writeBackSharded(ir::OpId id, ShardedValues& values) {
    const ir::Graph& graph = s_.runner->graph();
    std::vector<ir::ValueId> replaced = replacedState(graph, id);
    for (std::size_t j = 0; j < replaced.size(); ++j) {
      ShardedValue& sv = values.at(graph.op(id).outputs.at(j));
      const ir::ShardingSpec spec = s_.spmd->heldSpec(replaced[j]);
      (*s_.state)[bindingName(graph, replaced[j])] =
          sv.spec == spec ? sv.local : reshard(sv.local, s_.spmd->shape(replaced[j]), sv.spec, spec, s_.mesh, *s_.comm);
    }
  }

  // Optimizer op `id` on this member's boxes: the gradient (input 1) in its
  // parameter's layout, the scale (input 2) whole.
  void updateBoxesInPlace(ir::OpId id, ShardedValues& values) {
    const ir::Op& op = s_.runner->graph().op(id);
    std::vector<Tensor*> out = updatedState(op);
    const ir::ShardingSpec held = s_.spmd->heldSpec(op.inputs.at(0));
    std::vector<Tensor> brought(op.inputs.size());
    std::vector<const Tensor*> in(op.inputs.size(), nullptr);
    for (std::size_t j = 0; j < out.size(); ++j) in[updatedInput(j)] = out[j];
    for (std::size_t i = 0; i < op.inputs.size(); ++i) {
      if (in[i]) continue;
      const ir::ValueId v = op.inputs[i];
      const ShardedValue& sv = values.at(v);
      const ir::ShardingSpec wanted = i == 1 ? held : ir::ShardingSpec::replicated(sv.local.rank());
      if (sv.spec == wanted) {
        in[i] = &sv.local;
        continue;
      }
      auto start = Clock::now();
      brought[i] = reshard(sv.local, s_.spmd->shape(v), sv.spec, wanted, s_.mesh, *s_.comm);
      times_.commSeconds += secondsSince(start);
      in[i] = &brought[i];
    }
    s_.runner->runKernel(id, in, out, s_.optimizerStep);
    // What later update ops read, in the state's layouts (see updateInPlace).
    for (std::size_t j = 0; j < out.size(); ++j)
      values.insert_or_assign(op.outputs[j], ShardedValue{*out[j], s_.spmd->heldSpec(op.inputs.at(updatedInput(j)))});
    values.erase(op.inputs.at(1));
  }

  // The update of a sharded optimizer: every optimizer op runs on this
  // replica's flat shards — of the parameter (cut from the whole box it
  // holds), the gradient (reduce-scattered) and the state (held as shards) —
  // and leaves the parameter's updated shard for the ALL_GATHER. The other
  // update ops (constants) run whole.
  void updateFlat(ValueTable& shards) {
    if (s_.partition->clip) shards[clipScaleValue()] = clipScale(flatSquares(shards));
    const ir::Graph& graph = s_.runner->graph();
    runUpdateOps([&](ir::OpId id) { updateShardInPlace(id, shards); },
                 [&](ir::OpId id) {
                   if (!castTarget(graph, id)) runWhole(id, shards);  // casts: roundMasters, once the masters are whole
                 });
  }

  // Optimizer op `id` on this replica's shards: the parameter's shard is cut
  // from the box the device holds (which the forward reads until the
  // ALL_GATHER replaces it), the state's shards are updated in place, and the
  // gradient's shard is spent.
  void updateShardInPlace(ir::OpId id, ValueTable& shards) {
    static const TensorMap kNoInputs;
    const ir::Op& op = s_.runner->graph().op(id);
    const std::string& name = bindingName(s_.runner->graph(), op.inputs.at(0));
    Tensor parameter;
    {
      MemoryScope category(MemoryCategory::kParameters);
      parameter = flatShardOf(s_.state->at(name), s_.replica, s_.replicas);
    }
    std::vector<Tensor*> out = updatedState(op);
    out.at(0) = &parameter;
    // The state's inputs are the shards themselves (the runner would check
    // them against the whole shapes); the gradient and the scale come as usual.
    std::vector<const Tensor*> in(op.inputs.size(), nullptr);
    for (std::size_t j = 0; j < out.size(); ++j) in.at(updatedInput(j)) = out[j];
    for (std::size_t i = 0; i < op.inputs.size(); ++i)
      if (!in[i]) in[i] = &s_.runner->input(id, op.inputs[i], shards, *s_.state, kNoInputs);
    s_.runner->runKernel(id, in, out, s_.optimizerStep);
    shards.erase(op.inputs.at(1));
    if (!updatedShards_) throw std::logic_error("a sharded update with nowhere to put the parameters' shards");
    updatedShards_->insert_or_assign(name, std::move(parameter));
  }

  // The squares of this replica's gradient shards (the padding is zero); on a
  // mesh, a box repeated along a mesh dimension is counted by one member.
  double flatSquares(const ValueTable& shards) const {
    std::vector<const Tensor*> counted;
    for (int vs : stages_) {
      const passes::StagePiece& p = piece(vs);
      for (std::size_t i = 0; i < p.gradients.size(); ++i) {
        const ir::ShardingSpec held = s_.spmd ? s_.spmd->heldSpec(p.gradientParameters[i])
                                              : ir::ShardingSpec::replicated(0);
        if (countsOnce(held)) counted.push_back(&shards.at(p.gradients[i]));
      }
    }
    return sumOfSquares(counted);
  }

  // The squares of the gradients' elements this device counts: partial sums
  // reduced first (in place: the update then reads them reduced), and a box
  // repeated along a mesh dimension its layout does not split counted by the
  // member at coordinate 0 of that dimension only.
  double shardedSquares(ShardedValues& values) {
    std::vector<const Tensor*> counted;
    for (int vs : stages_)
      for (ir::ValueId g : piece(vs).gradients) {
        ShardedValue& sv = values.at(g);
        if (sv.spec.partial() != ir::MeshAxes::kNone) {
          ir::ShardingSpec reduced = ir::ShardingSpec::fromDims(sv.spec.dims(), ir::MeshAxes::kNone);
          auto start = Clock::now();
          sv.local = reshard(std::move(sv.local), s_.spmd->shape(g), sv.spec, reduced, s_.mesh, *s_.comm);
          times_.commSeconds += secondsSince(start);
          sv.spec = reduced;
        }
        if (countsOnce(sv.spec)) counted.push_back(&sv.local);
      }
    return sumOfSquares(counted);
  }

  bool countsOnce(const ir::ShardingSpec& spec) const {
    ir::MeshAxes used = ir::MeshAxes::kNone;
    for (ir::MeshAxes a : spec.dims()) used = used | a;
    return (ir::hasAxis(used, 0) || s_.mesh.row() == 0) && (ir::hasAxis(used, 1) || s_.mesh.column() == 0);
  }

  const DeviceStep& s_;
  const std::set<int>& stages_;
  const std::map<ir::ValueId, ir::ShardingSpec>& specs_;
  TensorMap* updatedShards_;
  DeviceTimes times_;
};

}  // namespace

void roundMasters(const DeviceStep& step, const std::set<int>& stages) {
  const ir::Graph& graph = step.runner->graph();
  for (int vs : stages)
    for (ir::OpId id : step.partition->stages.at(static_cast<std::size_t>(vs)).update) {
      auto param = castTarget(graph, id);
      if (!param) continue;
      // The cast reads the optimizer's new master: output j of the update op
      // that replaces its input updatedInput(j), the master leaf.
      const ir::ValueId updated = graph.op(id).inputs.at(0);
      const ir::Op& optimizer = graph.op(graph.value(updated).producer);
      const auto j = static_cast<std::size_t>(
          std::find(optimizer.outputs.begin(), optimizer.outputs.end(), updated) - optimizer.outputs.begin());
      const Tensor& master = step.state->at(bindingName(graph, optimizer.inputs.at(updatedInput(j))));
      Tensor rounded;
      std::vector<const Tensor*> in{&master};
      std::vector<Tensor*> out{&rounded};
      MemoryScope category(MemoryCategory::kParameters);
      step.runner->runKernel(id, in, out, step.optimizerStep);
      (*step.state)[bindingName(graph, *param)] = std::move(rounded);
    }
}

DeviceTimes runUpdate(const DeviceStep& step, const std::set<int>& stages, ValueTable gradients,
                      const std::map<ir::ValueId, ir::ShardingSpec>& specs, TensorMap* updatedShards) {
  return UpdateRun(step, stages, specs, updatedShards).run(std::move(gradients));
}

}  // namespace meshflow::runtime
