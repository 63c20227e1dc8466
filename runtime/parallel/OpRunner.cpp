#include "runtime/parallel/OpRunner.h"

#include <fmt/format.h>

#include <algorithm>

#include "runtime/KernelBackend.h"

namespace meshflow::runtime {

std::vector<std::string> leafNames(const ir::Graph& graph) {
  std::vector<std::string> names(graph.valueCount());
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v) {
    ir::OpKind producer = graph.op(graph.value(v).producer).kind;
    if (producer == ir::OpKind::Input || producer == ir::OpKind::Parameter) names[v] = bindingName(graph, v);
  }
  return names;
}

const Tensor& boundLeaf(const ir::Graph& graph, ir::OpId reader, ir::ValueId v, const std::string& name,
                        const Shape& shape, const TensorMap& state, const TensorMap& inputs) {
  ir::OpKind producer = graph.op(graph.value(v).producer).kind;
  const TensorMap* leaves = producer == ir::OpKind::Parameter ? &state
                            : producer == ir::OpKind::Input   ? &inputs
                                                              : nullptr;
  if (leaves) {
    if (auto it = leaves->find(name); it != leaves->end()) {
      if (it->second.shape() != shape)
        throw ExecutionError(graph, reader,
                             fmt::format("`{}` is {} but the graph expects shape {}", name,
                                         it->second.typeText(), shapeText(shape)));
      return it->second;
    }
  }
  throw ExecutionError(graph, reader,
                       fmt::format("value {}{} is not on this device", v, name.empty() ? "" : " (`" + name + "`)"));
}

std::uint64_t dropoutElementOffset(const ir::Graph& graph, ir::OpId id, std::int64_t microbatch,
                                   std::int64_t firstSample) {
  const ir::Op& op = graph.op(id);
  if ((op.kind != ir::OpKind::Dropout && op.kind != ir::OpKind::DropoutGrad) || firstSample == 0 || op.inputs.empty())
    return 0;
  const auto& shape = graph.value(op.inputs[0]).type.shape;
  if (shape.empty() || !shape[0].perBatch) return 0;
  const std::int64_t perSample = shapeElements(boundShape(graph.value(op.inputs[0]).type, microbatch)) / microbatch;
  return static_cast<std::uint64_t>(firstSample * perSample);
}

OpRunner::OpRunner(const ir::Graph& graph, std::int64_t microbatch)
    : graph_(graph), microbatch_(microbatch), names_(leafNames(graph)), readers_(graph) {
  shapes_.reserve(graph.valueCount());
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v) shapes_.push_back(boundShape(graph.value(v).type, microbatch));
}

const Tensor& OpRunner::input(ir::OpId reader, ir::ValueId v, const ValueTable& values,
                              const TensorMap& state, const TensorMap& inputs) const {
  if (auto it = values.find(v); it != values.end()) return it->second;
  return boundLeaf(graph_, reader, v, names_[v], shapes_[v], state, inputs);
}

void OpRunner::runKernel(ir::OpId id, const std::vector<const Tensor*>& in, std::vector<Tensor*>& out,
                         std::int64_t step, std::int64_t firstSample) const {
  try {
    runtime::runKernel(graph_.op(id), in, out,
                       cpu::KernelContext{step, id, dropoutElementOffset(graph_, id, microbatch_, firstSample)});
  } catch (const ExecutionError&) {
    throw;
  } catch (const std::exception& e) {
    throw ExecutionError(graph_, id, e.what());
  }
}

std::size_t OpRunner::runAttentionAt(std::span<const ir::OpId> ops, std::size_t i, ValueTable& values,
                                     const TensorMap& state, const TensorMap& inputs) const {
  std::optional<FusedAttentions::Run> run;
  try {
    run = attention_.at(graph_, ops, i);
  } catch (const std::runtime_error& e) {
    throw ExecutionError(graph_, ops[i], e.what());
  }
  if (!run) return 0;
  const AttentionGroup& g = *run->group;
  const ir::OpId first = ops[i];
  auto in = [&](ir::ValueId v) -> const Tensor& { return input(first, v, values, state, inputs); };
  const cpu::AttentionOptions options{g.scale, g.causal};
  try {
    if (!run->backward) {
      cpu::AttentionResult r = runAttention(in(g.q), in(g.k), in(g.v), options);
      values.insert_or_assign(g.out, std::move(r.out));
      values.insert_or_assign(g.softmaxOut, r.lse);
      values.insert_or_assign(g.probs, std::move(r.lse));
    } else {
      cpu::AttentionGrads d = runAttentionGrad(in(g.q), in(g.k), in(g.v), in(g.dOut), in(g.probs), options);
      values.insert_or_assign(g.dq, std::move(d.dq));
      values.insert_or_assign(g.dk, std::move(d.dk));
      values.insert_or_assign(g.dv, std::move(d.dv));
    }
  } catch (const ExecutionError&) {
    throw;
  } catch (const std::exception& e) {
    throw ExecutionError(graph_, first, fmt::format("{} (the fused attention {} of ops {}..{})", e.what(),
                                                    run->backward ? "backward" : "forward", first,
                                                    ops[i + run->count - 1]));
  }
  return run->count;
}

bool OpRunner::runGroup(const FusedGroup& group, std::span<const ir::OpId> ops, KernelBackend& backend,
                        ValueTable& values, const TensorMap& state, const TensorMap& inputs,
                        std::int64_t step) const {
  const ir::OpId first = ops[group.first];
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  for (ir::ValueId v : group.inputs) in.push_back(&input(first, v, values, state, inputs));
  std::vector<ir::ValueId> added;
  for (std::size_t k = 0; k < group.outputs.size(); ++k) {
    const ir::ValueId v = group.outputs[k];
    if (!group.live[k]) {
      out.push_back(nullptr);
      continue;
    }
    auto [it, fresh] = values.insert_or_assign(v, Tensor::placeholder(graph_.value(v).type.dtype, shapes_[v]));
    out.push_back(&it->second);
    added.push_back(v);
  }
  try {
    if (backend.runFused(group, in, out, cpu::KernelContext{step, first, 0})) return true;
  } catch (const std::exception& e) {
    throw ExecutionError(graph_, first, fmt::format("{} (fused as {} with the next {} ops)", e.what(),
                                                    fusedPatternName(group.pattern), group.count - 1));
  }
  for (ir::ValueId v : added) values.erase(v);
  return false;
}

void OpRunner::run(std::span<const ir::OpId> ops, ValueTable& values, const TensorMap& state,
                   const TensorMap& inputs, std::int64_t step, const ReleasePlan* releases,
                   std::int64_t firstSample, double* moeDropped) const {
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  // Nothing here reads or writes the tensors' elements between the ops: a GPU
  // backend may keep them in flight until the batch ends.
  KernelBatch batch;
  KernelBackend* backend = KernelScope::current();
  const std::vector<FusedGroup> groups =
      backend && backend->fuses() ? findFusedGroups(graph_, ops, readers_) : std::vector<FusedGroup>{};
  auto group = groups.begin();
  const auto release = [&](std::size_t i) {
    if (releases)
      for (ir::ValueId v : releases->after[i]) values.erase(v);
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (const std::size_t ran = attention_.empty() ? 0 : runAttentionAt(ops, i, values, state, inputs)) {
      for (std::size_t k = 0; k < ran; ++k) release(i + k);
      i += ran - 1;
      continue;
    }
    while (group != groups.end() && group->first < i) ++group;  // overlapped a fused attention
    if (group != groups.end() && group->first == i) {
      const FusedGroup& g = *group++;
      if (runGroup(g, ops, *backend, values, state, inputs, step)) {
        for (std::size_t k = 0; k < g.count; ++k) release(i + k);
        i += g.count - 1;
        continue;
      }
    }
    const ir::OpId id = ops[i];
    const ir::Op& op = graph_.op(id);
    in.clear();
    out.clear();
    for (ir::ValueId v : op.inputs) in.push_back(&input(id, v, values, state, inputs));
    for (ir::ValueId v : op.outputs) {
      // The graph's dtype and shape, for the kernel to allocate (uninitialised:
      // every kernel writes each element of its outputs) and to be checked against.
      auto [it, fresh] =
          values.insert_or_assign(v, Tensor::placeholder(graph_.value(v).type.dtype, shapes_[v]));
      out.push_back(&it->second);
    }
    runKernel(id, in, out, step, firstSample);
    if (moeDropped && op.kind == ir::OpKind::MoeDispatch) {
      settleKernels();  // the host reads the gates
      *moeDropped += cpu::droppedChoices(op, *in.at(1));
    }
    release(i);
  }
  batch.finish();
}

}  // namespace meshflow::runtime
