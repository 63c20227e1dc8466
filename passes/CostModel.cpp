#include "passes/CostModel.h"

#include <algorithm>

#include "ir/OpCost.h"

namespace meshflow::passes {

double rooflineTime(double flops, double bytes, const ir::DeviceSpec& device) {
  double compute = device.peakFlops > 0 ? flops / (device.peakFlops * kComputeEfficiency) : 0;
  double memory = device.memoryBandwidth > 0 ? bytes / device.memoryBandwidth : 0;
  return std::max(compute, memory);
}

double opComputeTime(const ir::Graph& graph, ir::OpId id, std::int64_t batch,
                     std::int64_t parallelism, const ir::DeviceSpec& device) {
  ir::OpCost c = ir::opCost(graph, id, batch);
  double p = double(std::max<std::int64_t>(parallelism, 1));
  return rooflineTime(c.flops / p, c.bytes() / p, device) +
         rooflineTime(c.backwardFlops / p, c.backwardBytes() / p, device);
}

MemoryBreakdown& MemoryBreakdown::operator+=(const MemoryBreakdown& other) {
  weights += other.weights;
  gradients += other.gradients;
  optimizerState += other.optimizerState;
  activations += other.activations;
  return *this;
}

MemoryBreakdown parameterMemory(double bytes, const ir::ShardingSpec& spec,
                                std::int64_t syncDevices, const ir::LogicalMesh& mesh,
                                const MemoryOptions& options) {
  MemoryBreakdown m;
  m.weights = bytes / double(spec.shardCount(mesh));
  double state = m.weights;
  if (options.shardOptimizerState) state /= double(std::max<std::int64_t>(syncDevices, 1));
  m.gradients = state;
  m.optimizerState = state * options.optimizerCopies;
  return m;
}

double activationMemory(const ir::Graph& graph, ir::OpId id, std::int64_t batch,
                        const std::vector<ir::ShardingSpec>& outputSpecs,
                        const ir::LogicalMesh& mesh, const MemoryOptions& options) {
  const ir::Op& op = graph.op(id);
  if (op.kind == ir::OpKind::Parameter || op.kind == ir::OpKind::Constant ||
      op.kind == ir::OpKind::Reshape) {
    return 0;
  }
  double bytes = 0;
  for (std::size_t o = 0; o < op.outputs.size(); ++o) {
    const ir::TensorType& t = graph.value(op.outputs[o]).type;
    double total = double(t.elements(batch)) * double(ir::dtypeBytes(t.dtype));
    bytes += total / double(outputSpecs.at(o).shardCount(mesh));
  }
  return bytes * double(options.microbatchesHeld);
}

}  // namespace meshflow::passes
