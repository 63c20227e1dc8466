#include "passes/CostModel.h"

#include <algorithm>

#include "ir/OpCost.h"

namespace meshflow::passes {

double rooflineTime(double flops, double bytes, const ir::DeviceSpec& device) {
  double compute = device.peakFlops > 0 ? flops / (device.peakFlops * kComputeEfficiency) : 0;
  double memory = device.memoryBandwidth > 0 ? bytes / device.memoryBandwidth : 0;
  return std::max(compute, memory);
}

namespace {

bool isFusible(ir::OpKind kind) {
  using K = ir::OpKind;
  switch (kind) {
    case K::Add: case K::Sub: case K::Mul: case K::Div: case K::Neg: case K::Relu:
    case K::Gelu: case K::Tanh: case K::Sigmoid: case K::Exp: case K::Rsqrt: case K::Scale: case K::Cast:
    case K::CausalMask: case K::Dropout: case K::Softmax:
      return true;
    default:
      return false;
  }
}

bool isLeaf(ir::OpKind kind) {
  return kind == ir::OpKind::Input || kind == ir::OpKind::Parameter ||
         kind == ir::OpKind::Constant;
}

// The share of an op's memory traffic left after fusion: an element-wise op
// whose first input another kernel just produced runs in that kernel's
// epilogue (XLA's loop fusion; Megatron's fused bias-GeLU and
// scale-mask-softmax kernels), so that input never goes back to memory and is
// not read again. Its backward fuses the same way.
double unfusedShare(const ir::Graph& graph, const ir::Op& op, std::int64_t batch,
                    const ir::OpCost& c) {
  if (!isFusible(op.kind) || op.inputs.empty() || c.bytes() <= 0) return 1;
  const ir::ValueInfo& in = graph.value(op.inputs[0]);
  if (isLeaf(graph.op(in.producer).kind)) return 1;
  double inputBytes = double(in.type.elements(batch)) * double(ir::dtypeBytes(in.type.dtype));
  return std::clamp((c.bytes() - inputBytes) / c.bytes(), 0.0, 1.0);
}

// The share of an op's memory traffic left inside a fused kernel: the bytes of
// the values it reads from and writes to outside the kernel. Its backward
// keeps the same share.
double fusedShare(const ir::Graph& graph, const ir::Op& op, std::int64_t batch,
                  const ir::OpCost& c, const FusedKernels& fused) {
  if (c.bytes() <= 0) return 1;
  auto bytesOf = [&](ir::ValueId v) {
    const ir::TensorType& t = graph.value(v).type;
    return double(t.elements(batch)) * double(ir::dtypeBytes(t.dtype));
  };
  double outside = 0;
  for (ir::ValueId v : op.inputs)
    if (!fused.isInternal(v)) outside += bytesOf(v);
  for (ir::ValueId v : op.outputs)
    if (!fused.isInternal(v)) outside += bytesOf(v);
  return std::clamp(outside / c.bytes(), 0.0, 1.0);
}

// The device as it runs op `kind`: a matrix product at the device's peak, any
// other kernel at its vector rate.
ir::DeviceSpec unitsFor(ir::OpKind kind, const ir::DeviceSpec& device) {
  ir::DeviceSpec units = device;
  if (kind != ir::OpKind::MatMul && device.vectorFlops > 0) units.peakFlops = device.vectorFlops;
  return units;
}

// Kernels the op runs: none for a leaf the executor binds; one forward, and
// for a backward one per floating input that another op computed or that is
// a parameter (the gradients autodiff emits).
int kernelCount(const ir::Graph& graph, const ir::Op& op, const ir::OpCost& c) {
  if (op.kind == ir::OpKind::Input || op.kind == ir::OpKind::Parameter) return 0;
  int kernels = 1;
  if (c.backwardFlops <= 0 && c.backwardBytes() <= 0) return kernels;
  for (ir::ValueId v : op.inputs) {
    const ir::ValueInfo& in = graph.value(v);
    ir::OpKind producer = graph.op(in.producer).kind;
    bool floating = in.type.dtype == ir::DType::F32 || in.type.dtype == ir::DType::F16 ||
                    in.type.dtype == ir::DType::BF16;
    if (floating && producer != ir::OpKind::Input && producer != ir::OpKind::Constant) ++kernels;
  }
  return kernels;
}

}  // namespace

double opComputeTime(const ir::Graph& graph, ir::OpId id, std::int64_t batch,
                     std::int64_t parallelism, const ir::DeviceSpec& device,
                     const FusedKernels* fused) {
  const ir::Op& op = graph.op(id);
  ir::OpCost c = ir::opCost(graph, id, batch);
  double p = double(std::max<std::int64_t>(parallelism, 1));
  const bool inKernel = fused && fused->fused(id);
  double share = inKernel ? fusedShare(graph, op, batch, c, *fused)
                          : unfusedShare(graph, op, batch, c);
  if (inKernel && fused->kindOfOp[id] == FusedKind::kAttention && op.kind == ir::OpKind::MatMul) {
    const FusedProductWork work = fusedProductWork(fused->causalProduct[id]);
    c.flops *= work.forward;
    c.backwardFlops *= work.backward;
  }
  ir::DeviceSpec units = unitsFor(op.kind, device);
  double latency = device.kernelLatency > 0 ? device.kernelLatency * kernelCount(graph, op, c) : 0;
  return rooflineTime(c.flops / p, share * c.bytes() / p, units) +
         rooflineTime(c.backwardFlops / p, share * c.backwardBytes() / p, units) + latency;
}

MemoryBreakdown& MemoryBreakdown::operator+=(const MemoryBreakdown& other) {
  weights += other.weights;
  gradients += other.gradients;
  optimizerState += other.optimizerState;
  activations += other.activations;
  return *this;
}

namespace {

constexpr double kFp32 = 4;

bool isMixed(ir::DType dtype) { return ir::dtypeBytes(dtype) < kFp32; }

// Optimizer state per parameter element, in bytes. The moments are fp32 at any
// precision. Mixed-precision training (Micikevicius et al., ICLR 2018) updates
// an fp32 master copy of a half-precision weight: 4 bytes more.
double optimizerStateBytes(ir::DType dtype, int copies) {
  return kFp32 * (copies + (isMixed(dtype) ? 1 : 0));
}

// Gradient bytes per parameter element: the parameter's precision, except that
// a half-precision weight's gradient accumulates in fp32, as Megatron-LM's
// distributed data parallelism does (its `main_grad` buffer, which the
// optimizer reads directly; no half-precision gradient is kept beside it).
// With Adam that makes Megatron's 18 bytes per parameter: 2 + 4 + 4 + 8
// (megatron/training/theoretical_memory_usage.py).
double gradientBytes(ir::DType dtype) {
  return isMixed(dtype) ? kFp32 : double(ir::dtypeBytes(dtype));
}

}  // namespace

MemoryBreakdown parameterMemory(double elements, ir::DType dtype, const ir::ShardingSpec& spec,
                                std::int64_t syncDevices, const ir::LogicalMesh& mesh,
                                const MemoryOptions& options) {
  double local = elements / double(spec.shardCount(mesh));
  double stateElements = local;
  if (options.shardOptimizerState) stateElements /= double(std::max<std::int64_t>(syncDevices, 1));
  MemoryBreakdown m;
  m.weights = local * double(ir::dtypeBytes(dtype));
  m.gradients = stateElements * gradientBytes(dtype);
  m.optimizerState = stateElements * optimizerStateBytes(dtype, options.optimizerCopies);
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
  const std::vector<bool>* held = options.heldForBackward;
  for (std::size_t o = 0; o < op.outputs.size(); ++o) {
    if (held && !(op.outputs[o] < held->size() && (*held)[op.outputs[o]])) continue;
    const ir::TensorType& t = graph.value(op.outputs[o]).type;
    double total = double(t.elements(batch)) * double(ir::dtypeBytes(t.dtype));
    bytes += total / double(outputSpecs.at(o).shardCount(mesh));
  }
  return bytes * double(options.microbatchesHeld);
}

}  // namespace meshflow::passes
