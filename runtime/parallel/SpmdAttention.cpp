// A fused attention run SPMD (SpmdRunner::fuseAttention): each device runs
// the fused kernel on its boxes of q, k and v, held in q's layout on their
// leading dimensions (batch and heads: a tensor-parallel plan splits heads)
// and whole along rows and features, which is what the fused kernel needs —
// a softmax row and a feature vector on one device. The log-sum-exp is held
// in that layout without its last dimension, so the backward finds the
// layout its forward ran in.
#include <fmt/format.h>

#include "runtime/KernelBackend.h"
#include "runtime/parallel/SpmdRunner.h"

namespace meshflow::runtime {
namespace {

// `leading`'s first rank - 2 dimensions' axes, the last two whole.
ir::ShardingSpec rowsWhole(const ir::ShardingSpec& leading, std::size_t rank) {
  std::vector<ir::MeshAxes> dims(rank, ir::MeshAxes::kNone);
  for (std::size_t d = 0; d + 2 < rank && d < leading.rank(); ++d) dims[d] = leading.dim(d);
  return ir::ShardingSpec::fromDims(std::move(dims));
}

// The log-sum-exp's layout for operands in `spec`: without the feature dimension.
ir::ShardingSpec lseSpec(const ir::ShardingSpec& spec) {
  std::vector<ir::MeshAxes> dims(spec.dims().begin(), spec.dims().end() - 1);
  return ir::ShardingSpec::fromDims(std::move(dims));
}

// The operands' layout for a log-sum-exp held in `lse`: the feature dimension whole.
ir::ShardingSpec operandSpec(const ir::ShardingSpec& lse) {
  std::vector<ir::MeshAxes> dims = lse.dims();
  dims.push_back(ir::MeshAxes::kNone);
  return ir::ShardingSpec::fromDims(std::move(dims));
}

// The op of `ops` that makes `v`.
ir::OpId producerIn(const ir::Graph& graph, const std::vector<ir::OpId>& ops, ir::ValueId v) {
  for (ir::OpId id : ops)
    if (!graph.op(id).outputs.empty() && graph.op(id).outputs[0] == v) return id;
  return ops.back();
}

}  // namespace

Tensor SpmdRunner::operandIn(ir::OpId reader, ir::ValueId v, const ir::ShardingSpec& spec, ShardedValues& values,
                             const TensorMap& state, const TensorMap& inputs, const MeshPlace& place,
                             Communicator& comm) const {
  const ShardedValue& held = lookup(reader, v, values, state, inputs, place);
  return held.spec == spec ? held.local : reshard(held.local, shapes_[v], held.spec, spec, place, comm);
}

void SpmdRunner::keep(ir::ValueId v, ir::OpId producer, Tensor local, ir::ShardingSpec spec, ShardedValues& values,
                      const MeshPlace& place, Communicator& comm) const {
  const PlannedSpecs plan = usablePlan(producer);
  if (!plan.outputs.empty() && plan.outputs[0] != spec) {
    local = reshard(std::move(local), shapes_[v], spec, plan.outputs[0], place, comm);
    spec = plan.outputs[0];
  }
  values[v] = ShardedValue{std::move(local), std::move(spec)};
}

std::size_t SpmdRunner::runAttentionAt(std::span<const ir::OpId> ops, std::size_t i, ShardedValues& values,
                                       const TensorMap& state, const TensorMap& inputs, const MeshPlace& place,
                                       Communicator& comm) const {
  const std::optional<FusedAttentions::Run> run = attention_.at(graph_, ops, i);
  if (!run) return 0;
  const AttentionGroup& g = *run->group;
  const ir::OpId first = ops[i];
  const cpu::AttentionOptions options{g.scale, g.causal};
  auto in = [&](ir::ValueId v, const ir::ShardingSpec& spec) {
    return operandIn(first, v, spec, values, state, inputs, place, comm);
  };
  if (!run->backward) {
    const std::size_t rank = shapes_[g.q].size();
    ir::ShardingSpec spec = rowsWhole(lookup(first, g.q, values, state, inputs, place).spec, rank);
    if (!fits(spec, shapes_[g.q]) || !fits(spec, shapes_[g.k])) spec = ir::ShardingSpec::replicated(rank);
    cpu::AttentionResult r = runAttention(in(g.q, spec), in(g.k, spec), in(g.v, spec), options);
    keep(g.out, g.forward.back(), std::move(r.out), spec, values, place, comm);
    values[g.softmaxOut] = ShardedValue{r.lse, lseSpec(spec)};
    values[g.probs] = ShardedValue{std::move(r.lse), lseSpec(spec)};
    return run->count;
  }
  const ShardedValue& lse = values.at(g.probs);
  const ir::ShardingSpec spec = operandSpec(lse.spec);
  const Tensor lseLocal = lse.local;
  cpu::AttentionGrads d =
      runAttentionGrad(in(g.q, spec), in(g.k, spec), in(g.v, spec), in(g.dOut, spec), lseLocal, options);
  keep(g.dq, producerIn(graph_, g.backward, g.dq), std::move(d.dq), spec, values, place, comm);
  keep(g.dk, producerIn(graph_, g.backward, g.dk), std::move(d.dk), spec, values, place, comm);
  keep(g.dv, producerIn(graph_, g.backward, g.dv), std::move(d.dv), spec, values, place, comm);
  return run->count;
}

}  // namespace meshflow::runtime
