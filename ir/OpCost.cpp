#include "ir/OpCost.h"

#include <algorithm>

namespace meshflow::ir {
namespace {

/// FLOPs per element of output 0 of an op, and of the backward autodiff makes
/// of it (0 for ops that are themselves backward or update ops).
struct PerElement {
  OpKind kind;
  double forward;
  double backward;
};

// Why these numbers: add is one add, its backward sums the gradient over any
// broadcast dims (one add per element at most); mul's backward is two multiplies;
// div's is dy/b and -dy·a/b² (4). gelu (tanh form) is x³ (2), ·c (1), +x (1),
// ·√(2/π) (1), tanh (1), +1 (1), ·x (1), ·½ (1) = 9; its derivative about 16.
// softmax is max, subtract, exp, sum, divide (5); its backward y·(dy − Σ dy·y)
// is 4. layer_norm is mean, subtract, square, sum, scale, ·γ, +β (7); its
// backward 13 (recompute x̂, dy·γ, two sums, combine, dγ, dβ). Dropout compares
// a random number to p and scales. rsqrt adds eps and takes 1/√ (2); its
// backward y·y·y·dy·(−½) (4). sgd: scale g, weight decay, momentum,
// step (7); adam: scale g, weight decay, two moments, bias correction, sqrt,
// divide, step (16).
constexpr PerElement kPerElement[] = {
    {OpKind::Add, 1, 1},
    {OpKind::Sub, 1, 2},
    {OpKind::Mul, 1, 2},
    {OpKind::Div, 1, 4},
    {OpKind::Neg, 1, 1},
    {OpKind::Relu, 1, 1},
    {OpKind::Gelu, 9, 16},
    {OpKind::Tanh, 1, 3},
    {OpKind::Sigmoid, 4, 3},
    {OpKind::Exp, 1, 1},
    {OpKind::Rsqrt, 2, 4},
    {OpKind::Scale, 1, 1},
    {OpKind::Cast, 1, 1},
    {OpKind::Softmax, 5, 4},
    {OpKind::LayerNorm, 7, 13},
    {OpKind::Dropout, 2, 2},
    {OpKind::CausalMask, 1, 1},
    {OpKind::ReluGrad, 1, 0},
    {OpKind::GeluGrad, 16, 0},
    {OpKind::TanhGrad, 3, 0},
    {OpKind::SigmoidGrad, 3, 0},
    {OpKind::SoftmaxGrad, 4, 0},
    {OpKind::LayerNormGrad, 13, 0},
    {OpKind::CrossEntropyGrad, 5, 0},
    {OpKind::DropoutGrad, 2, 0},
    {OpKind::CausalMaskGrad, 1, 0},
    {OpKind::TopKGateGrad, 4, 0},
    {OpKind::SgdUpdate, 7, 0},
    {OpKind::AdamUpdate, 16, 0},
};

/// The sizes an op's cost is computed from, with the batch bound.
class Sizes {
 public:
  Sizes(const Graph& graph, const Op& op, std::int64_t batch)
      : graph_(graph), op_(op), batch_(batch) {}

  double inElems(std::size_t i) const { return elems(op_.inputs.at(i)); }
  double outElems(std::size_t i) const { return elems(op_.outputs.at(i)); }
  double inBytes(std::size_t i) const { return bytes(op_.inputs.at(i)); }
  double outBytes(std::size_t i) const { return bytes(op_.outputs.at(i)); }
  double allIn() const { return sum(op_.inputs); }
  double allOut() const { return sum(op_.outputs); }
  double floatIn() const {
    double total = 0;
    for (ValueId v : op_.inputs)
      if (isFloat(graph_.value(v).type.dtype)) total += bytes(v);
    return total;
  }
  const Op& op() const { return op_; }
  std::int64_t batch() const { return batch_; }

 private:
  static bool isFloat(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16; }
  double elems(ValueId v) const { return double(graph_.value(v).type.elements(batch_)); }
  double bytes(ValueId v) const {
    return elems(v) * double(dtypeBytes(graph_.value(v).type.dtype));
  }
  double sum(const std::vector<ValueId>& values) const {
    double total = 0;
    for (ValueId v : values) total += bytes(v);
    return total;
  }

  const Graph& graph_;
  const Op& op_;
  std::int64_t batch_;
};

/// Graph.h declares the forward primitives from MatMul up to the first backward op.
bool isForwardKind(OpKind kind) { return kind >= OpKind::MatMul && kind < OpKind::ReduceToShape; }

/// Reads the inputs, writes the outputs; a forward op's backward reads the
/// inputs and output gradients and writes the floating inputs' gradients.
OpCost streaming(const Sizes& s, double flops, double backwardFlops) {
  OpCost c{flops, s.allIn(), s.allOut()};
  if (isForwardKind(s.op().kind)) {
    c.backwardFlops = backwardFlops;
    c.backwardBytesRead = s.allIn() + s.allOut();
    c.backwardBytesWritten = s.floatIn();
  }
  return c;
}

/// Moves data without arithmetic; its backward moves the gradient back.
OpCost movement(const Sizes& s, double read, double written) {
  OpCost c{0, read, written};
  if (isForwardKind(s.op().kind)) {
    c.backwardBytesRead = written;
    c.backwardBytesWritten = read;
  }
  return c;
}

OpCost matmulCost(const Sizes& s, const Graph& g) {
  // k is the batch itself in a weight gradient (Aᵀ·dY contracts over the samples).
  const auto& a = g.value(s.op().inputs.at(0)).type.shape;
  double k = double((flagAttr(s.op(), "transpose_a") ? a[a.size() - 2] : a.back()).resolve(s.batch()));
  double flops = 2 * s.outElems(0) * k;
  OpCost c{flops, s.allIn(), s.allOut()};
  // dA = dY·Bᵀ and dB = Aᵀ·dY: each reads dY and the other operand.
  c.backwardFlops = 2 * flops;
  c.backwardBytesRead = s.allIn() + 2 * s.outBytes(0);
  c.backwardBytesWritten = s.allIn();
  return c;
}

OpCost embeddingCost(const Sizes& s) {
  // A gather reads only the rows it copies; the backward scatter-adds dy into
  // a dense table gradient.
  OpCost c{0, s.inBytes(1) + s.outBytes(0), s.outBytes(0)};
  c.backwardFlops = s.outElems(0);
  c.backwardBytesRead = s.inBytes(1) + s.outBytes(0);
  c.backwardBytesWritten = s.inBytes(0);
  return c;
}

OpCost crossEntropyCost(const Sizes& s) {
  // Per logit: max, subtract, exp, sum (4); backward: softmax again, minus the
  // one-hot, times dloss / positions (5).
  OpCost c{4 * s.inElems(0), s.allIn(), s.allOut()};
  c.backwardFlops = 5 * s.inElems(0);
  c.backwardBytesRead = s.allIn() + s.allOut();
  c.backwardBytesWritten = s.inBytes(0);
  return c;
}

OpCost reduceCost(const Sizes& s) {
  bool mean = s.op().kind == OpKind::Mean;
  OpCost c{s.inElems(0) + (mean ? s.outElems(0) : 0), s.inBytes(0), s.outBytes(0)};
  c.backwardFlops = mean ? s.inElems(0) : 0;
  c.backwardBytesRead = s.outBytes(0);
  c.backwardBytesWritten = s.inBytes(0);
  return c;
}

OpCost topKGateCost(const Sizes& s) {
  auto it = s.op().attrs.find("k");
  double k = it == s.op().attrs.end() ? 1 : double(std::get<std::int64_t>(it->second));
  // Selecting the k largest of E costs about k compares per element, then a
  // softmax over them.
  return streaming(s, (k + 4) * s.outElems(0), 4 * s.outElems(0));
}

// Dispatch reads every gate once to route (a compare and a count per gate)
// and copies the kept tokens into their slots; its backward gathers the slots
// back. Combine multiplies each slot by its gate and adds it to its token (2
// per slot element); its backward scales dout into the slots (1) and takes a
// dot product per slot for the gate (2). Slots are counted whole: capacity is
// what the buffers hold, used or not.
OpCost moeDispatchCost(const Sizes& s) {
  OpCost c{2 * s.inElems(1), s.allIn(), s.outBytes(0)};
  c.backwardFlops = s.outElems(0);
  c.backwardBytesRead = s.outBytes(0) + s.inBytes(1);
  c.backwardBytesWritten = s.inBytes(0);
  return c;
}

OpCost moeCombineCost(const Sizes& s) {
  OpCost c{2 * s.inElems(0) + 2 * s.inElems(1), s.allIn(), s.outBytes(0)};
  c.backwardFlops = 3 * s.inElems(0);
  c.backwardBytesRead = s.allIn() + s.outBytes(0);
  c.backwardBytesWritten = s.allIn();
  return c;
}

OpCost globalNormCost(const Sizes& s) {
  double elements = 0;
  for (std::size_t i = 0; i < s.op().inputs.size(); ++i) elements += s.inElems(i);
  return streaming(s, 2 * elements + 1, 0);
}

std::optional<OpCost> perElementCost(const Sizes& s) {
  for (const auto& entry : kPerElement)
    if (entry.kind == s.op().kind)
      return streaming(s, entry.forward * s.outElems(0), entry.backward * s.outElems(0));
  return std::nullopt;
}

OpCost specialCost(const Sizes& s, const Graph& g) {
  switch (s.op().kind) {
    case OpKind::MatMul:
      return matmulCost(s, g);
    case OpKind::Embedding:
      return embeddingCost(s);
    case OpKind::CrossEntropy:
      return crossEntropyCost(s);
    case OpKind::Sum:
    case OpKind::Mean:
      return reduceCost(s);
    case OpKind::TopKGate:
      return topKGateCost(s);
    case OpKind::MoeDispatch:
      return moeDispatchCost(s);
    case OpKind::MoeCombine:
      return moeCombineCost(s);
    case OpKind::MoeDropped:
      return {2 * s.inElems(0), s.inBytes(0), s.outBytes(0)};
    case OpKind::MoeDispatchGrad:
      return {s.inElems(0), s.allIn(), s.outBytes(0)};
    case OpKind::MoeCombineGrad:
      return {3 * s.inElems(0), s.allIn(), s.allOut()};
    case OpKind::Transpose:
    case OpKind::Concat:
    case OpKind::Split:
    case OpKind::SplitHeads:
    case OpKind::MergeHeads:
      return movement(s, s.allIn(), s.allOut());
    case OpKind::Select:
      return movement(s, s.outBytes(0), s.outBytes(0));
    // `like` is read for its shape only.
    case OpKind::ReduceToShape:
      return {s.inElems(0) - s.outElems(0), s.inBytes(0), s.outBytes(0)};
    case OpKind::SelectGrad:
    case OpKind::BroadcastTo:
      return {0, s.inBytes(0), s.outBytes(0)};
    case OpKind::EmbeddingGrad:
      return {s.inElems(1), s.inBytes(0) + s.inBytes(1), s.outBytes(0)};
    case OpKind::GlobalNorm:
      return globalNormCost(s);
    case OpKind::LossScaleUpdate:
    case OpKind::ClipScale:
      return {3, s.allIn(), s.allOut()};
    default:
      return {};  // leaves and reshape (a view) cost nothing
  }
}

}  // namespace

OpCost& OpCost::operator+=(const OpCost& other) {
  flops += other.flops;
  bytesRead += other.bytesRead;
  bytesWritten += other.bytesWritten;
  backwardFlops += other.backwardFlops;
  backwardBytesRead += other.backwardBytesRead;
  backwardBytesWritten += other.backwardBytesWritten;
  return *this;
}

OpCost opCost(const Graph& graph, OpId id, std::int64_t batch) {
  Sizes sizes(graph, graph.op(id), batch);
  if (auto cost = perElementCost(sizes)) return *cost;
  return specialCost(sizes, graph);
}

OpCost graphCost(const Graph& graph, std::int64_t batch) {
  OpCost total;
  for (OpId id = 0; id < graph.ops().size(); ++id) total += opCost(graph, id, batch);
  return total;
}

std::int64_t parameterCount(const Graph& graph) {
  std::int64_t count = 0;
  for (ValueId v : graph.parameters()) count += graph.value(v).type.elements(1);
  return count;
}

}  // namespace meshflow::ir
