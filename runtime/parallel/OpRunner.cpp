#include "runtime/parallel/OpRunner.h"

#include <fmt/format.h>

#include "runtime/cpu/Kernels.h"

namespace meshflow::runtime {

OpRunner::OpRunner(const ir::Graph& graph, std::int64_t microbatch)
    : graph_(graph), names_(graph.valueCount()) {
  shapes_.reserve(graph.valueCount());
  for (ir::ValueId v = 0; v < graph.valueCount(); ++v) {
    shapes_.push_back(boundShape(graph.value(v).type, microbatch));
    ir::OpKind producer = graph.op(graph.value(v).producer).kind;
    if (producer == ir::OpKind::Input || producer == ir::OpKind::Parameter)
      names_[v] = bindingName(graph, v);
  }
}

const Tensor* OpRunner::lookup(ir::OpId reader, ir::ValueId v, const ValueTable& values,
                               const TensorMap& state, const TensorMap& inputs) const {
  if (auto it = values.find(v); it != values.end()) return &it->second;
  ir::OpKind producer = graph_.op(graph_.value(v).producer).kind;
  const TensorMap* leaves = producer == ir::OpKind::Parameter ? &state
                            : producer == ir::OpKind::Input   ? &inputs
                                                              : nullptr;
  if (leaves) {
    if (auto it = leaves->find(names_[v]); it != leaves->end()) {
      if (it->second.shape() != shapes_[v])
        throw ExecutionError(graph_, reader,
                             fmt::format("`{}` is {} but the stage expects shape {}", names_[v],
                                         it->second.typeText(), shapeText(shapes_[v])));
      return &it->second;
    }
  }
  throw ExecutionError(graph_, reader,
                       fmt::format("value {}{} is not on this device", v,
                                   names_[v].empty() ? "" : " (`" + names_[v] + "`)"));
}

void OpRunner::run(std::span<const ir::OpId> ops, ValueTable& values, const TensorMap& state,
                   const TensorMap& inputs, std::int64_t step) const {
  std::vector<const Tensor*> in;
  std::vector<Tensor*> out;
  for (ir::OpId id : ops) {
    const ir::Op& op = graph_.op(id);
    in.clear();
    out.clear();
    for (ir::ValueId v : op.inputs) in.push_back(lookup(id, v, values, state, inputs));
    for (ir::ValueId v : op.outputs) {
      auto [it, fresh] = values.insert_or_assign(v, Tensor(graph_.value(v).type.dtype, shapes_[v]));
      out.push_back(&it->second);
    }
    try {
      cpu::runKernel(op, in, out, cpu::KernelContext{step, id});
    } catch (const ExecutionError&) {
      throw;
    } catch (const std::exception& e) {
      throw ExecutionError(graph_, id, e.what());
    }
  }
}

}  // namespace meshflow::runtime
