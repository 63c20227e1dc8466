#include "runtime/parallel/SpmdRunner.h"

#include <fmt/format.h>

#include "runtime/KernelBackend.h"
#include "runtime/parallel/SpmdRules.h"

namespace meshflow::runtime {

SpmdRunner::SpmdRunner(const ir::Graph& graph, std::int64_t microbatch, std::array<std::int64_t, 2> mesh,
                       std::map<ir::OpId, PlannedSpecs> planned)
    : graph_(graph), microbatch_(microbatch), planned_(std::move(planned)), names_(leafNames(graph)) {
  mesh_.shape = mesh;
  shapes_.reserve(graph.valueCount());
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v)
    shapes_.push_back(boundShape(graph.value(v).type, microbatch));
}

ir::ShardingSpec SpmdRunner::heldSpec(ir::ValueId v) const {
  ir::OpId producer = graph_.value(v).producer;
  const ir::Op& op = graph_.op(producer);
  // Optimizer state is a Parameter of the update run whose forwardOp is its parameter.
  if (op.kind == ir::OpKind::Parameter && op.phase == ir::Phase::Update && op.forwardOp) producer = *op.forwardOp;
  if (auto it = planned_.find(producer);
      it != planned_.end() && !it->second.outputs.empty() && fits(it->second.outputs[0], shapes_[v]))
    return it->second.outputs[0];
  return ir::ShardingSpec::replicated(shapes_[v].size());
}

bool SpmdRunner::fits(const ir::ShardingSpec& spec, const Shape& shape) const {
  return spec.fits(shape, mesh_);
}

// The plan's specs for op `id` that fit this run's shapes (a plan made for
// another microbatch size may not divide this one): its inputs only if they
// all fit, each output on its own.
PlannedSpecs SpmdRunner::usablePlan(ir::OpId id) const {
  PlannedSpecs usable;
  auto it = planned_.find(id);
  if (it == planned_.end()) return usable;
  const ir::Op& op = graph_.op(id);
  bool inputsFit = it->second.inputs.size() == op.inputs.size();
  for (std::size_t i = 0; inputsFit && i < op.inputs.size(); ++i)
    inputsFit = fits(it->second.inputs[i], shapes_[op.inputs[i]]);
  if (inputsFit) usable.inputs = it->second.inputs;
  for (std::size_t j = 0; j < op.outputs.size(); ++j)
    usable.outputs.push_back(j < it->second.outputs.size() && fits(it->second.outputs[j], shapes_[op.outputs[j]])
                                 ? it->second.outputs[j]
                                 : ir::ShardingSpec::replicated(shapes_[op.outputs[j]].size()));
  return usable;
}

const ShardedValue& SpmdRunner::lookup(ir::OpId reader, ir::ValueId v, ShardedValues& values,
                                       const TensorMap& state, const TensorMap& inputs,
                                       const MeshPlace& place) const {
  if (auto it = values.find(v); it != values.end()) return it->second;
  ir::ShardingSpec spec = heldSpec(v);
  if (graph_.op(graph_.value(v).producer).kind == ir::OpKind::Parameter)  // the state holds boxes
    return values[v] = ShardedValue{boundLeaf(graph_, reader, v, names_[v], localShape(spec, shapes_[v], place),
                                              state, inputs),
                                    spec};
  const Tensor& whole = boundLeaf(graph_, reader, v, names_[v], shapes_[v], state, inputs);
  return values[v] = ShardedValue{takeShard(whole, spec, place), spec};
}

void SpmdRunner::run(std::span<const ir::OpId> ops, ShardedValues& values, const TensorMap& state,
                     const TensorMap& inputs, std::int64_t step, const MeshPlace& place,
                     Communicator& comm, const ReleasePlan* releases, std::int64_t firstSample,
                     double* moeDropped) const {
  const ir::LogicalMesh mesh = place.logical();
  if (mesh.shape != mesh_.shape)
    throw std::logic_error("SpmdRunner: the mesh differs from the one it was made for");
  // Ops stay in flight between reshards (a GPU keeps them queued); a reshard
  // waits for them before it hands boxes to the other members.
  KernelBatch batch;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (releases && i > 0)
      for (ir::ValueId v : releases->after[i - 1]) values.erase(v);
    const ir::OpId id = ops[i];
    const ir::Op& op = graph_.op(id);
    if (op.kind == ir::OpKind::Input || op.kind == ir::OpKind::Parameter) continue;  // read when used
    try {
      if (const std::size_t ran = attention_.empty() ? 0 : runAttentionAt(ops, i, values, state, inputs, place, comm)) {
        for (std::size_t k = 0; releases && k + 1 < ran; ++k)
          for (ir::ValueId v : releases->after[i + k]) values.erase(v);
        i += ran - 1;
        continue;
      }
      std::vector<ir::ShardingSpec> held;
      std::vector<Shape> inShapes, outShapes;
      for (ir::ValueId v : op.inputs) {
        const ShardedValue& sv = lookup(id, v, values, state, inputs, place);
        held.push_back(sv.spec);
        inShapes.push_back(shapes_[v]);
      }
      for (ir::ValueId v : op.outputs) outShapes.push_back(shapes_[v]);
      PlannedSpecs plan = usablePlan(id);
      SpmdLayout layout = spmdLayout(op, held, inShapes, outShapes, plan.inputs, mesh);
      // Operands in the held layout are read in place; the others resharded.
      std::vector<Tensor> resharded(op.inputs.size());
      std::vector<const Tensor*> in;
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const ShardedValue& sv = values.at(op.inputs[i]);
        if (sv.spec != layout.inputs[i])
          resharded[i] = reshard(sv.local, inShapes[i], sv.spec, layout.inputs[i], place, comm);
        in.push_back(sv.spec == layout.inputs[i] ? &sv.local : &resharded[i]);
      }
      // Outputs as OpRunner gives them: typed and shaped (the local box), for
      // the kernel to allocate where it keeps its tensors.
      std::vector<Tensor> results;
      for (std::size_t j = 0; j < op.outputs.size(); ++j)
        results.push_back(Tensor::placeholder(graph_.value(op.outputs[j]).type.dtype,
                                              localShape(layout.outputs[j], outShapes[j], place)));
      std::vector<Tensor*> out;
      for (Tensor& t : results) out.push_back(&t);
      // Dropout runs whole (SpmdRules.h): its microbatch's offset is enough.
      runtime::runKernel(op, in, out, cpu::KernelContext{step, id, dropoutElementOffset(graph_, id, microbatch_, firstSample)});
      for (std::size_t j = 0; j < op.outputs.size(); ++j) {
        ir::ShardingSpec spec = layout.outputs[j];
        ir::ShardingSpec target = spec;
        if (!plan.outputs.empty())
          target = plan.outputs[j];
        else if (op.phase == ir::Phase::Backward && spec.isReplicated())
          target = cutTarget(held, inShapes, outShapes[j]);
        if (target != spec) {
          results[j] = reshard(std::move(results[j]), outShapes[j], spec, target, place, comm);
          spec = target;
        }
        values[op.outputs[j]] = ShardedValue{std::move(results[j]), spec};
      }
      // The drops counted once per mesh, on the whole gates (a split over
      // the tokens of a group would change which choices a box drops).
      if (moeDropped && op.kind == ir::OpKind::MoeDispatch) {
        Tensor gates = whole(op.inputs[1], values, place, comm);
        settleKernels();  // the host reads them
        if (place.index == 0) *moeDropped += cpu::droppedChoices(op, gates);
      }
    } catch (const ExecutionError&) {
      throw;
    } catch (const std::exception& e) {
      throw ExecutionError(graph_, id, e.what());
    }
  }
  if (releases && !ops.empty())
    for (ir::ValueId v : releases->after[ops.size() - 1]) values.erase(v);
  batch.finish();
}

Tensor SpmdRunner::whole(ir::ValueId v, const ShardedValues& values, const MeshPlace& place,
                         Communicator& comm) const {
  const ShardedValue& sv = values.at(v);
  return reshard(sv.local, shapes_[v], sv.spec, ir::ShardingSpec::replicated(shapes_[v].size()), place, comm);
}

}  // namespace meshflow::runtime
