#include "passes/Autodiff.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "ir/OpRules.h"

namespace meshflow::passes {
namespace {

using ir::Attribute;
using ir::Attributes;
using ir::Dim;
using ir::DType;
using ir::Graph;
using ir::Op;
using ir::OpId;
using ir::OpKind;
using ir::Phase;
using ir::TensorType;
using ir::ValueId;

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

/// The forward kinds autodiff knows: leaves (no VJP needed) and primitives.
/// Backward and update kinds are not differentiable, and neither is a kind
/// added to the IR after this pass was written, until it gets a rule.
constexpr OpKind kDifferentiable[] = {
    OpKind::Input,      OpKind::Parameter, OpKind::Constant,     OpKind::MatMul,
    OpKind::Add,        OpKind::Sub,       OpKind::Mul,          OpKind::Div,
    OpKind::Neg,        OpKind::Relu,      OpKind::Gelu,         OpKind::Tanh,
    OpKind::Sigmoid,    OpKind::Exp,       OpKind::Scale,        OpKind::Softmax,
    OpKind::LayerNorm,  OpKind::Embedding, OpKind::CrossEntropy, OpKind::Reshape,
    OpKind::Transpose,  OpKind::Concat,    OpKind::Split,        OpKind::Sum,
    OpKind::Mean,       OpKind::Dropout,   OpKind::SplitHeads,   OpKind::MergeHeads,
    OpKind::CausalMask, OpKind::TopKGate,  OpKind::Select,       OpKind::MoeDispatch,
    OpKind::MoeCombine, OpKind::MoeDropped,
    OpKind::Cast,       OpKind::Rsqrt,
};

bool hasVjpRule(OpKind kind) {
  return std::find(std::begin(kDifferentiable), std::end(kDifferentiable), kind) !=
         std::end(kDifferentiable);
}

bool isLeaf(OpKind kind) {
  return kind == OpKind::Input || kind == OpKind::Parameter || kind == OpKind::Constant;
}

std::string opLabel(const Graph& graph, OpId id) {
  const Op& op = graph.op(id);
  std::string name = ir::opName(op.kind);
  if (name == "?") name = fmt::format("kind {}", static_cast<int>(op.kind));
  return fmt::format("op #{} ({}{})", id, name, op.scope.empty() ? "" : " in " + op.scope);
}

// ---- attributes ----

const Attribute* findAttr(const Op& op, const std::string& name) {
  auto it = op.attrs.find(name);
  return it == op.attrs.end() ? nullptr : &it->second;
}

std::int64_t intAttr(const Op& op, const std::string& name, std::optional<std::int64_t> fallback) {
  const Attribute* attr = findAttr(op, name);
  if (attr && std::holds_alternative<std::int64_t>(*attr)) return std::get<std::int64_t>(*attr);
  if (!attr && fallback) return *fallback;
  throw AutodiffError(fmt::format("{} needs an integer attribute '{}'", ir::opName(op.kind), name));
}

std::vector<std::int64_t> intsAttr(const Op& op, const std::string& name) {
  const Attribute* attr = findAttr(op, name);
  if (attr && std::holds_alternative<std::vector<std::int64_t>>(*attr))
    return std::get<std::vector<std::int64_t>>(*attr);
  throw AutodiffError(fmt::format("{} needs a list attribute '{}'", ir::opName(op.kind), name));
}

/// The listed attributes of `op` that it has, to hand on to its backward op.
Attributes copyAttrs(const Op& op, std::initializer_list<const char*> names) {
  Attributes attrs;
  for (const char* name : names)
    if (const Attribute* attr = findAttr(op, name)) attrs.emplace(name, *attr);
  return attrs;
}

std::int64_t normalizeAxis(std::int64_t axis, std::size_t rank) {
  return axis < 0 ? axis + static_cast<std::int64_t>(rank) : axis;
}

// ---- types of the intermediate values backward ops make ----

/// NumPy broadcasting over trailing dimensions (the shapes were checked when
/// the forward graph was traced, so a mismatch here is an internal error).
TensorType broadcastType(const TensorType& a, const TensorType& b) {
  const TensorType& longer = a.rank() >= b.rank() ? a : b;
  const TensorType& shorter = a.rank() >= b.rank() ? b : a;
  TensorType result = longer;
  std::size_t offset = longer.rank() - shorter.rank();
  for (std::size_t i = 0; i < shorter.rank(); ++i) {
    const Dim& s = shorter.shape[i];
    Dim& r = result.shape[offset + i];
    if (r == Dim::constant(1))
      r = s;
    else if (!(s == Dim::constant(1)) && !(s == r))
      throw std::logic_error("autodiff: cannot broadcast " + a.text() + " with " + b.text());
  }
  return result;
}

TensorType matmulType(const TensorType& a, const TensorType& b, bool transposeB) {
  if (a.rank() < 2 || b.rank() < 2)
    throw std::logic_error("autodiff: matmul of " + a.text() + " and " + b.text());
  TensorType leadA{a.dtype, {a.shape.begin(), a.shape.end() - 2}};
  TensorType leadB{b.dtype, {b.shape.begin(), b.shape.end() - 2}};
  TensorType result = broadcastType(leadA, leadB);
  result.shape.push_back(a.shape[a.rank() - 2]);
  result.shape.push_back(transposeB ? b.shape[b.rank() - 2] : b.shape[b.rank() - 1]);
  return result;
}

TensorType transposeType(const TensorType& x, const std::vector<std::int64_t>& perm) {
  TensorType result = x;
  for (std::size_t i = 0; i < perm.size(); ++i) result.shape.at(i) = x.shape.at(perm[i]);
  return result;
}

std::vector<std::int64_t> swapLastTwo(std::size_t rank) {
  std::vector<std::int64_t> perm;
  for (std::size_t i = 0; i < rank; ++i) perm.push_back(static_cast<std::int64_t>(i));
  std::swap(perm[rank - 2], perm[rank - 1]);
  return perm;
}

/// The product of `dims`, if it is representable as one Dim (at most one of
/// them a batch multiple).
std::optional<Dim> product(const std::vector<Dim>& dims) {
  Dim result = Dim::constant(1);
  for (const Dim& d : dims) {
    if (d.perBatch && result.perBatch) return std::nullopt;
    result = {result.value * d.value, result.perBatch || d.perBatch};
  }
  return result;
}

/// The `shape` attribute of a Reshape to `type`: the one batch-multiple
/// dimension, if any, is -1 (inferred); more than one cannot be written.
std::optional<std::vector<std::int64_t>> reshapeAttr(const TensorType& type) {
  std::vector<std::int64_t> dims;
  int symbolic = 0;
  for (const Dim& d : type.shape) {
    dims.push_back(d.perBatch ? -1 : d.value);
    symbolic += d.perBatch;
  }
  if (symbolic > 1) return std::nullopt;
  return dims;
}

// ---- the builder ----

/// Builds one training graph; lives only for one call of buildTrainingGraph.
class TrainingGraphBuilder {
 public:
  TrainingGraphBuilder(const Graph& forward, const OptimizerConfig& optimizer)
      : forward_(forward), optimizer_(optimizer) {}

  TrainingGraph build() {
    checkForward();
    markRequiresGrad();
    graph_ = forward_;
    grads_.assign(forward_.valueCount(), std::nullopt);
    ValueId loss = forward_.outputs[0];
    if (requiresGrad_[loss]) {
      setContext(forward_.value(loss).producer, Phase::Backward);
      grads_[loss] = optimizer_.lossScale > 0 ? lossScaleLeaves() : constant(1.0);
    }
    for (OpId id = static_cast<OpId>(forward_.ops().size()); id-- > 0;) differentiate(id);
    return update(loss);
  }

 private:
  void checkForward() const;
  void checkOptimizer() const;
  void markRequiresGrad();
  void differentiate(OpId id);
  void differentiateMatMul(const Op& op, ValueId dy);
  void differentiateMoeCombine(const Op& op, ValueId dy);
  void differentiateArithmetic(const Op& op, ValueId dy);
  void differentiateShape(const Op& op, ValueId dy);
  void differentiateSplit(const Op& op);
  void differentiateMean(const Op& op, ValueId dy);
  TrainingGraph update(ValueId loss);
  ValueId stateLeaf(const std::string& param, const std::string& role, const TensorType& type);
  ValueId masterLeaf(OpId param, const std::string& name);
  ValueId lossScaleLeaves();
  ValueId gradientFactor(const std::vector<ValueId>& grads);
  void updateLossScale(ValueId factor, std::vector<WriteBack>& writeBacks);
  /// Makes the backward value `g` (a half parameter's gradient) fp32: through
  /// the sums, transposes and reshapes that only it reads, back to the ops
  /// that compute its terms, which keep those outputs in fp32 (ir::kF32Outputs;
  /// their kernels compute in fp32 and skip the rounding).
  void keepInF32(ValueId g, const std::vector<std::vector<OpId>>& consumers) {
    std::vector<ValueId> work{g};
    while (!work.empty()) {
      const ValueId v = work.back();
      work.pop_back();
      if (!isFloat(typeOf(v).dtype) || typeOf(v).dtype == DType::F32) continue;
      const OpId producer = graph_.value(v).producer;
      Op& op = graph_.ops().at(producer);
      if (op.kind == OpKind::Input || op.kind == OpKind::Parameter) continue;
      graph_.value(v).type.dtype = DType::F32;
      auto onlyHere = [&](ValueId u) {
        const OpKind kind = graph_.op(graph_.value(u).producer).kind;
        return typeOf(u).dtype == DType::F32 ||
               (consumers.at(u).size() == 1 && kind != OpKind::Input && kind != OpKind::Parameter);
      };
      const bool passesOn = op.kind == OpKind::Add || op.kind == OpKind::Transpose || op.kind == OpKind::Reshape;
      if (passesOn && std::all_of(op.inputs.begin(), op.inputs.end(), onlyHere)) {
        work.insert(work.end(), op.inputs.begin(), op.inputs.end());
        continue;
      }
      std::vector<std::int64_t> wide;
      if (auto it = op.attrs.find(ir::kF32Outputs); it != op.attrs.end())
        wide = std::get<std::vector<std::int64_t>>(it->second);
      const auto index = std::find(op.outputs.begin(), op.outputs.end(), v) - op.outputs.begin();
      wide.push_back(static_cast<std::int64_t>(index));
      std::sort(wide.begin(), wide.end());
      op.attrs[ir::kF32Outputs] = wide;
    }
  }

  ValueId castTo(ValueId v, DType dtype) {
    TensorType type = typeOf(v);
    type.dtype = dtype;
    return emit(OpKind::Cast, {v}, type, {{"dtype", std::string(ir::dtypeName(dtype))}});
  }

  // ---- emitting ops ----

  /// Ops emitted from now on belong to `forwardOp` (its scope and location).
  void setContext(std::optional<OpId> forwardOp, Phase phase) {
    phase_ = phase;
    forwardOp_ = forwardOp;
    scope_ = forwardOp ? forward_.op(*forwardOp).scope : "";
    location_ = forwardOp ? forward_.op(*forwardOp).location : ir::Location{};
  }

  std::vector<ValueId> emitMulti(OpKind kind, std::vector<ValueId> inputs,
                                 const std::vector<TensorType>& types, Attributes attrs = {}) {
    Op op;
    op.kind = kind;
    op.inputs = std::move(inputs);
    op.attrs = std::move(attrs);
    op.scope = scope_;
    op.location = location_;
    op.phase = phase_;
    op.forwardOp = forwardOp_;
    return graph_.op(graph_.addOp(std::move(op), types)).outputs;
  }

  ValueId emit(OpKind kind, std::vector<ValueId> inputs, const TensorType& type,
               Attributes attrs = {}) {
    return emitMulti(kind, std::move(inputs), {type}, std::move(attrs)).front();
  }

  // Returned by value: emitting an op may move the graph's value table.
  TensorType typeOf(ValueId v) const { return graph_.value(v).type; }

  ValueId constant(double value) {
    return emit(OpKind::Constant, {}, TensorType{DType::F32, {}}, {{"value", value}});
  }

  /// A tensor shaped like `like` with every element `value`.
  ValueId filledLike(ValueId like, double value) {
    std::vector<std::int64_t> axes;
    for (std::size_t i = 0; i < typeOf(like).rank(); ++i)
      axes.push_back(static_cast<std::int64_t>(i));
    return emit(OpKind::BroadcastTo, {constant(value), like}, typeOf(like), {{"axes", axes}});
  }
  ValueId zerosLike(ValueId like) { return filledLike(like, 0.0); }

  /// Sums a broadcast gradient back to the shape of the value it belongs to.
  ValueId reduceTo(ValueId grad, ValueId like) {
    if (typeOf(grad).shape == typeOf(like).shape) return grad;
    return emit(OpKind::ReduceToShape, {grad, like}, typeOf(like));
  }

  /// Adds a contribution to the gradient of forward value `v`. Contributions
  /// arrive in reverse op order, then input order, so the sum is deterministic.
  void accumulate(ValueId v, ValueId contribution) {
    if (typeOf(contribution).shape != typeOf(v).shape)
      throw std::logic_error(fmt::format("autodiff: gradient {} for value {} of type {}",
                                         typeOf(contribution).text(), v, typeOf(v).text()));
    auto& slot = grads_.at(v);
    slot = slot ? emit(OpKind::Add, {*slot, contribution}, typeOf(v)) : contribution;
  }

  /// The gradient of op input `v` is `kind(inputs){attrs}`, typed like `v`.
  void unary(ValueId v, OpKind kind, std::vector<ValueId> inputs, Attributes attrs = {}) {
    if (requiresGrad_[v]) accumulate(v, emit(kind, std::move(inputs), typeOf(v), std::move(attrs)));
  }

  const Graph& forward_;
  const OptimizerConfig& optimizer_;
  Graph graph_;
  std::vector<bool> requiresGrad_;             // per forward value
  std::vector<std::optional<ValueId>> grads_;  // per forward value
  std::optional<ValueId> lossScale_, lossScaleCounts_;  // with dynamic loss scaling
  Phase phase_ = Phase::Backward;
  std::optional<OpId> forwardOp_;
  std::string scope_;
  ir::Location location_;
};

void TrainingGraphBuilder::checkForward() const {
  if (forward_.outputs.size() != 1)
    throw AutodiffError(
        fmt::format("the forward graph must have exactly one output, its loss; it has {}",
                    forward_.outputs.size()));
  const TensorType& loss = forward_.value(forward_.outputs[0]).type;
  if (loss.dtype != DType::F32 || loss.rank() != 0)
    throw AutodiffError("the loss must be an f32 scalar, f32[]; the forward graph's output is " +
                        loss.text());
  for (OpId id = 0; id < forward_.ops().size(); ++id)
    if (!hasVjpRule(forward_.op(id).kind))
      throw AutodiffError(
          fmt::format("{} has no VJP rule: a forward graph holds only leaves and "
                      "forward primitives",
                      opLabel(forward_, id)));
  checkOptimizer();
}

void TrainingGraphBuilder::checkOptimizer() const {
  const OptimizerConfig& o = optimizer_;
  auto require = [](bool ok, const char* what) {
    if (!ok) throw AutodiffError(fmt::format("optimizer: {}", what));
  };
  auto finite = [](double v) { return std::isfinite(v) && v >= 0; };
  require(finite(o.lr), "lr must be a finite number >= 0");
  require(o.momentum >= 0 && o.momentum < 1, "momentum must lie in [0, 1)");
  require(finite(o.weightDecay), "weight_decay must be a finite number >= 0");
  require(finite(o.clipNorm), "clip_norm must be a finite number >= 0 (0 = off)");
  require(o.kind == OptimizerConfig::Kind::Sgd || (std::isfinite(o.eps) && o.eps > 0),
          "eps must be a finite number > 0");
  require(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
          "beta1 and beta2 must lie in [0, 1)");
  require(o.lossScale == 0 || (std::isfinite(o.lossScale) && o.lossScale >= 1),
          "the initial loss scale must be a finite number >= 1");
  require(o.lossScaleWindow >= 1, "loss_scale_window must be >= 1");
}

/// A value needs a gradient when it is floating point and depends on a
/// parameter; gradients of data inputs, labels and ids are never computed.
void TrainingGraphBuilder::markRequiresGrad() {
  requiresGrad_.assign(forward_.valueCount(), false);
  for (const Op& op : forward_.ops()) {
    bool depends = op.kind == OpKind::Parameter;
    for (ValueId v : op.inputs) depends = depends || requiresGrad_[v];
    for (ValueId v : op.outputs)
      requiresGrad_[v] = depends && isFloat(forward_.value(v).type.dtype);
  }
}

void TrainingGraphBuilder::differentiate(OpId id) {
  const Op& op = forward_.op(id);
  if (isLeaf(op.kind)) return;
  bool reached = false;
  for (ValueId v : op.outputs) reached = reached || grads_[v].has_value();
  if (!reached) return;
  setContext(id, Phase::Backward);
  if (op.kind == OpKind::Split) return differentiateSplit(op);

  ValueId dy = *grads_[op.outputs[0]];
  ValueId x = op.inputs.empty() ? 0 : op.inputs[0];
  ValueId y = op.outputs[0];
  switch (op.kind) {
    case OpKind::MatMul:
      return differentiateMatMul(op, dy);
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
      return differentiateArithmetic(op, dy);
    case OpKind::Reshape:
    case OpKind::Transpose:
    case OpKind::Concat:
      return differentiateShape(op, dy);
    case OpKind::Mean:
      return differentiateMean(op, dy);
    case OpKind::Neg:
      return unary(x, OpKind::Neg, {dy});
    case OpKind::Scale:
      return unary(x, OpKind::Scale, {dy}, copyAttrs(op, {"factor"}));
    case OpKind::Cast:
      return unary(x, OpKind::Cast, {dy}, {{"dtype", std::string(ir::dtypeName(typeOf(x).dtype))}});
    case OpKind::Exp:
      return unary(x, OpKind::Mul, {dy, y});
    case OpKind::Rsqrt:  // d/dx (x + eps)^-1/2 = -y³ / 2
      if (requiresGrad_[x]) {
        ValueId y3 = emit(OpKind::Mul, {emit(OpKind::Mul, {y, y}, typeOf(y)), y}, typeOf(y));
        unary(x, OpKind::Scale, {emit(OpKind::Mul, {dy, y3}, typeOf(y))}, {{"factor", -0.5}});
      }
      return;
    case OpKind::Relu:
      return unary(x, OpKind::ReluGrad, {x, dy});
    case OpKind::Gelu:
      return unary(x, OpKind::GeluGrad, {x, dy});
    case OpKind::Tanh:
      return unary(x, OpKind::TanhGrad, {y, dy});
    case OpKind::Sigmoid:
      return unary(x, OpKind::SigmoidGrad, {y, dy});
    case OpKind::Softmax:
      return unary(x, OpKind::SoftmaxGrad, {y, dy});
    case OpKind::CausalMask:
      return unary(x, OpKind::CausalMaskGrad, {dy});
    case OpKind::SplitHeads:
      return unary(x, OpKind::MergeHeads, {dy});
    case OpKind::MergeHeads:
      return unary(x, OpKind::SplitHeads, {dy}, {{"heads", typeOf(x).shape.at(1).value}});
    case OpKind::Sum:
      return unary(x, OpKind::BroadcastTo, {dy, x}, {{"axes", intsAttr(op, "axes")}});
    case OpKind::TopKGate:
      return unary(x, OpKind::TopKGateGrad, {x, y, dy}, copyAttrs(op, {"k"}));
    case OpKind::CrossEntropy:
      return unary(x, OpKind::CrossEntropyGrad, {x, op.inputs[1], dy});
    case OpKind::MoeDispatch:  // the gates only choose the slots: no gradient reaches them
      return unary(x, OpKind::MoeDispatchGrad, {dy, op.inputs[1]}, copyAttrs(op, {"capacity"}));
    case OpKind::MoeCombine:
      return differentiateMoeCombine(op, dy);
    case OpKind::MoeDropped:  // a count: constant almost everywhere
      return;
    case OpKind::Dropout: {
      Attributes attrs = copyAttrs(op, {"p", "seed"});
      attrs["forward_op"] = static_cast<std::int64_t>(id);
      return unary(x, OpKind::DropoutGrad, {dy}, std::move(attrs));
    }
    case OpKind::Select: {
      Attributes attrs = copyAttrs(op, {"axis", "index"});
      attrs.emplace("axis", static_cast<std::int64_t>(typeOf(x).rank()) - 1);
      return unary(x, OpKind::SelectGrad, {dy, x}, std::move(attrs));
    }
    case OpKind::Embedding: {
      std::int64_t vocab = typeOf(x).shape.at(0).value;
      return unary(x, OpKind::EmbeddingGrad, {op.inputs[1], dy}, {{"vocab", vocab}});
    }
    case OpKind::LayerNorm: {
      ValueId gamma = op.inputs[1], beta = op.inputs[2];
      if (!requiresGrad_[x] && !requiresGrad_[gamma] && !requiresGrad_[beta]) return;
      auto grads = emitMulti(OpKind::LayerNormGrad, {x, gamma, dy},
                             {typeOf(x), typeOf(gamma), typeOf(beta)}, copyAttrs(op, {"eps"}));
      for (int i = 0; i < 3; ++i)
        if (requiresGrad_[op.inputs[i]]) accumulate(op.inputs[i], grads[i]);
      return;
    }
    default:
      throw AutodiffError(fmt::format("{} has no VJP rule", opLabel(forward_, id)));
  }
}

/// out = Σ_e gate·y[slot]: one MoeCombineGrad gives both gradients.
void TrainingGraphBuilder::differentiateMoeCombine(const Op& op, ValueId dy) {
  ValueId y = op.inputs[0], gates = op.inputs[1];
  if (!requiresGrad_[y] && !requiresGrad_[gates]) return;
  auto grads = emitMulti(OpKind::MoeCombineGrad, {y, gates, dy}, {typeOf(y), typeOf(gates)},
                         copyAttrs(op, {"capacity"}));
  for (int i = 0; i < 2; ++i)
    if (requiresGrad_[op.inputs[i]]) accumulate(op.inputs[i], grads[i]);
}

/// y = a·b (or a·bᵀ with transpose_b). da = dy·bᵀ (dy·b); db = aᵀ·dy (dyᵀ·a),
/// a MatMul with transpose_a.
/// A 2-D weight used by a batched a gets its gradient as one 2-D MatMul over
/// the flattened leading dims when they can be written as one Dim, else as a
/// batched MatMul summed with ReduceToShape.
void TrainingGraphBuilder::differentiateMatMul(const Op& op, ValueId dy) {
  ValueId a = op.inputs[0], b = op.inputs[1];
  if (ir::flagAttr(op, "transpose_a"))
    throw AutodiffError("a MatMul with transpose_a has no VJP rule (only backward graphs use it)");
  bool transposeB = ir::flagAttr(op, "transpose_b");
  TensorType ta = typeOf(a), tb = typeOf(b), tdy = typeOf(dy);
  if (requiresGrad_[a]) {
    ValueId da = emit(OpKind::MatMul, {dy, b}, matmulType(tdy, tb, !transposeB),
                      {{"transpose_b", std::int64_t{transposeB ? 0 : 1}}});
    accumulate(a, reduceTo(da, a));
  }
  if (!requiresGrad_[b]) return;
  // lhs·rhs gives db: aᵀ·dy, or dyᵀ·a when b was transposed.
  ValueId lhs = transposeB ? dy : a, rhs = transposeB ? a : dy;
  std::vector<Dim> lead(ta.shape.begin(), ta.shape.end() - 2);
  lead.push_back(ta.shape[ta.rank() - 2]);
  std::optional<Dim> rows = product(lead);
  const Dim& k = ta.shape.back();
  const Dim& n = tdy.shape.back();
  if (tb.rank() == 2 && ta.rank() > 2 && rows && !k.perBatch && !n.perBatch) {
    auto flatten = [&](ValueId v, const Dim& cols) {
      return emit(OpKind::Reshape, {v}, TensorType{typeOf(v).dtype, {*rows, cols}},
                  {{"shape", std::vector<std::int64_t>{-1, cols.value}}});
    };
    lhs = transposeB ? flatten(dy, n) : flatten(a, k);
    rhs = transposeB ? flatten(a, k) : flatten(dy, n);
  }
  // sgemm reads lhsᵀ in place (transpose_a): no Transpose op, no copy.
  TensorType lhsT = transposeType(typeOf(lhs), swapLastTwo(typeOf(lhs).rank()));
  ValueId db = emit(OpKind::MatMul, {lhs, rhs}, matmulType(lhsT, typeOf(rhs), false),
                    {{"transpose_a", std::int64_t{1}}});
  accumulate(b, reduceTo(db, b));
}

/// Broadcasting Add/Sub/Mul/Div: each operand's gradient is summed back to its
/// own shape. For y = a / b: db = -dy·y / b (= -dy·a / b²).
void TrainingGraphBuilder::differentiateArithmetic(const Op& op, ValueId dy) {
  ValueId a = op.inputs[0], b = op.inputs[1], y = op.outputs[0];
  auto binary = [&](OpKind kind, ValueId l, ValueId r) {
    return emit(kind, {l, r}, broadcastType(typeOf(l), typeOf(r)));
  };
  auto negate = [&](ValueId v) { return emit(OpKind::Neg, {v}, typeOf(v)); };
  ValueId da = dy, db = dy;
  if (op.kind == OpKind::Mul) {
    if (requiresGrad_[a]) da = binary(OpKind::Mul, dy, b);
    if (requiresGrad_[b]) db = binary(OpKind::Mul, dy, a);
  } else if (op.kind == OpKind::Div) {
    if (requiresGrad_[a]) da = binary(OpKind::Div, dy, b);
    if (requiresGrad_[b]) db = binary(OpKind::Div, binary(OpKind::Mul, dy, y), b);
  }
  if (requiresGrad_[a]) accumulate(a, reduceTo(da, a));
  if (!requiresGrad_[b]) return;
  // Negating after the reduction touches the smaller tensor.
  db = reduceTo(db, b);
  if (op.kind == OpKind::Sub || op.kind == OpKind::Div) db = negate(db);
  accumulate(b, db);
}

/// Reshape back, transpose by the inverse permutation, split a concatenation.
void TrainingGraphBuilder::differentiateShape(const Op& op, ValueId dy) {
  ValueId x = op.inputs[0];
  if (op.kind == OpKind::Reshape) {
    auto shape = reshapeAttr(typeOf(x));
    if (!shape)
      throw AutodiffError(
          fmt::format("{}: cannot reshape its gradient back to {}, which has "
                      "more than one batch dimension",
                      opLabel(forward_, *forwardOp_), typeOf(x).text()));
    return unary(x, OpKind::Reshape, {dy}, {{"shape", *shape}});
  }
  if (op.kind == OpKind::Transpose) {
    std::vector<std::int64_t> perm = intsAttr(op, "perm");
    std::vector<std::int64_t> inverse(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i)
      inverse.at(normalizeAxis(perm[i], perm.size())) = static_cast<std::int64_t>(i);
    return unary(x, OpKind::Transpose, {dy}, {{"perm", inverse}});
  }
  // Concat → Split at the inputs' extents along the axis.
  std::int64_t axis = intAttr(op, "axis", std::nullopt);
  std::vector<std::int64_t> sizes;
  std::vector<TensorType> types;
  bool any = false;
  for (ValueId v : op.inputs) {
    Dim extent = typeOf(v).shape.at(normalizeAxis(axis, typeOf(v).rank()));
    if (extent.perBatch)
      throw AutodiffError(fmt::format("{}: cannot split its gradient along the batch dimension",
                                      opLabel(forward_, *forwardOp_)));
    sizes.push_back(extent.value);
    types.push_back(typeOf(v));
    any = any || requiresGrad_[v];
  }
  if (!any) return;
  auto parts = emitMulti(OpKind::Split, {dy}, types, {{"axis", axis}, {"sizes", sizes}});
  for (std::size_t i = 0; i < parts.size(); ++i)
    if (requiresGrad_[op.inputs[i]]) accumulate(op.inputs[i], parts[i]);
}

/// Split → Concat of the outputs' gradients; an output nothing used gets zeros.
void TrainingGraphBuilder::differentiateSplit(const Op& op) {
  ValueId x = op.inputs[0];
  if (!requiresGrad_[x]) return;
  std::vector<ValueId> parts;
  for (ValueId y : op.outputs) parts.push_back(grads_[y] ? *grads_[y] : zerosLike(y));
  accumulate(x, emit(OpKind::Concat, parts, typeOf(x), copyAttrs(op, {"axis"})));
}

/// Mean → BroadcastTo, divided by the number of elements averaged. When a
/// batch dimension is averaged that count is symbolic, so it is computed in
/// the graph (a Sum of ones over the same axes) instead of being a Scale factor.
void TrainingGraphBuilder::differentiateMean(const Op& op, ValueId dy) {
  ValueId x = op.inputs[0];
  if (!requiresGrad_[x]) return;
  std::vector<std::int64_t> axes = intsAttr(op, "axes");
  std::vector<Dim> reduced;
  for (std::int64_t axis : axes)
    reduced.push_back(typeOf(x).shape.at(normalizeAxis(axis, typeOf(x).rank())));
  std::optional<Dim> count = product(reduced);
  Attributes broadcast = {{"axes", axes}};
  if (count && !count->perBatch) {
    ValueId spread = emit(OpKind::BroadcastTo, {dy, x}, typeOf(x), broadcast);
    return accumulate(x,
                      emit(OpKind::Scale, {spread}, typeOf(x), {{"factor", 1.0 / count->value}}));
  }
  ValueId n = emit(OpKind::Sum, {filledLike(x, 1.0)}, typeOf(dy), broadcast);
  ValueId share = emit(OpKind::Div, {dy, n}, typeOf(dy));
  accumulate(x, emit(OpKind::BroadcastTo, {share, x}, typeOf(x), broadcast));
}

ValueId TrainingGraphBuilder::stateLeaf(const std::string& param, const std::string& role,
                                        const TensorType& type) {
  std::string name = param + "." + role;
  ValueId v = emit(OpKind::Parameter, {}, type, {{"name", name}, {"init", std::string("zeros")}});
  graph_.value(v).name = name;
  return v;
}

/// The loss's gradient under dynamic loss scaling: the leaf `loss_scale`
/// (f32[], initialised to the configured scale) beside `loss_scale.counts`
/// (f32[2]: good steps in a row, skipped steps), both state of the stage
/// that computes the loss (forwardOp = the loss's op) and updated by
/// LossScaleUpdate after every step.
ValueId TrainingGraphBuilder::lossScaleLeaves() {
  auto leaf = [&](const std::string& name, TensorType type, Attributes attrs) {
    attrs["name"] = name;
    ValueId v = emit(OpKind::Parameter, {}, type, std::move(attrs));
    graph_.value(v).name = name;
    return v;
  };
  lossScale_ = leaf("loss_scale", TensorType{DType::F32, {}},
                    {{"init", std::string("full")}, {"value", optimizer_.lossScale}});
  lossScaleCounts_ = leaf("loss_scale.counts", TensorType{DType::F32, {Dim::constant(2)}},
                          {{"init", std::string("zeros")}});
  return *lossScale_;
}

/// The factor every gradient is multiplied by before the update: the clip
/// scale, and with loss scaling 1 / loss_scale — or NaN when a scaled
/// gradient overflowed, which makes every update skip the step.
ValueId TrainingGraphBuilder::gradientFactor(const std::vector<ValueId>& grads) {
  if (optimizer_.clipNorm <= 0 && !lossScale_) return constant(1.0);
  ValueId norm = emit(OpKind::GlobalNorm, grads, TensorType{DType::F32, {}});
  std::vector<ValueId> inputs = {norm};
  if (lossScale_) inputs.push_back(*lossScale_);
  return emit(OpKind::ClipScale, inputs, TensorType{DType::F32, {}}, {{"clip_norm", optimizer_.clipNorm}});
}

void TrainingGraphBuilder::updateLossScale(ValueId factor, std::vector<WriteBack>& writeBacks) {
  if (!lossScale_) return;
  setContext(forward_.value(forward_.outputs[0]).producer, Phase::Update);
  auto updated = emitMulti(OpKind::LossScaleUpdate, {*lossScale_, *lossScaleCounts_, factor},
                           {typeOf(*lossScale_), typeOf(*lossScaleCounts_)},
                           {{"window", optimizer_.lossScaleWindow}});
  writeBacks.push_back({updated[0], *lossScale_});
  writeBacks.push_back({updated[1], *lossScaleCounts_});
}

/// The fp32 master copy of half-precision parameter `param`: an update-phase
/// leaf initialised like the parameter (`init_name` makes a normal init draw
/// the parameter's own values), which the optimizer updates and the
/// parameter's half copy is rounded from after every step.
ValueId TrainingGraphBuilder::masterLeaf(OpId param, const std::string& name) {
  Attributes attrs = copyAttrs(forward_.op(param), {"init", "std"});
  attrs["name"] = name + ".master";
  attrs["init_name"] = name;
  TensorType type = typeOf(forward_.op(param).outputs[0]);
  type.dtype = DType::F32;
  ValueId v = emit(OpKind::Parameter, {}, type, std::move(attrs));
  graph_.value(v).name = name + ".master";
  return v;
}

TrainingGraph TrainingGraphBuilder::update(ValueId loss) {
  std::vector<OpId> params;
  std::vector<ValueId> grads;
  const std::vector<std::vector<OpId>> consumers = graph_.consumers();
  for (OpId id = 0; id < forward_.ops().size(); ++id) {
    const Op& op = forward_.op(id);
    if (op.kind != OpKind::Parameter) continue;
    ValueId w = op.outputs[0];
    if (!isFloat(forward_.value(w).type.dtype))
      throw AutodiffError(
          fmt::format("parameter '{}' is {}: only floating-point parameters "
                      "can be trained",
                      forward_.value(w).name, forward_.value(w).type.text()));
    // A parameter the loss does not depend on still gets its (zero) gradient,
    // so weight decay and momentum apply to it like to every other.
    setContext(id, Phase::Backward);
    params.push_back(id);
    ValueId grad = grads_[w] ? *grads_[w] : zerosLike(w);
    // Mixed precision: a half parameter's gradient is made in fp32 (never
    // rounded to half, so a microbatch's partial sum cannot overflow where
    // the batch's would not) and accumulated over microbatches and replicas
    // in fp32.
    if (forward_.value(w).type.dtype != DType::F32) {
      keepInF32(grad, consumers);
      if (typeOf(grad).dtype != DType::F32) grad = castTo(grad, DType::F32);
    }
    grads.push_back(grad);
  }

  setContext(std::nullopt, Phase::Update);
  ValueId scale = gradientFactor(grads);

  TrainingGraph result;
  std::vector<WriteBack> stateWriteBacks;
  bool sgd = optimizer_.kind == OptimizerConfig::Kind::Sgd;
  for (std::size_t i = 0; i < params.size(); ++i) {
    setContext(params[i], Phase::Update);
    ValueId w = forward_.op(params[i]).outputs[0];
    TensorType type = typeOf(w);
    std::string name = forward_.value(w).name;
    if (name.empty()) name = fmt::format("param{}", params[i]);
    // A half parameter is the compute copy of an fp32 master weight: the
    // optimizer updates the master (its state is fp32 too), and the new half
    // copy is the master rounded.
    bool mixed = type.dtype != DType::F32;
    ValueId master = w;
    if (mixed) {
      master = masterLeaf(params[i], name);
      type.dtype = DType::F32;
    }
    std::vector<ValueId> state;
    Attributes attrs = {{"lr", optimizer_.lr}, {"weight_decay", optimizer_.weightDecay}};
    if (sgd) {
      state = {stateLeaf(name, "momentum", type)};
      attrs["momentum"] = optimizer_.momentum;
    } else {
      state = {stateLeaf(name, "adam_m", type), stateLeaf(name, "adam_v", type)};
      attrs["beta1"] = optimizer_.beta1;
      attrs["beta2"] = optimizer_.beta2;
      attrs["eps"] = optimizer_.eps;
      attrs["decoupled"] = std::int64_t{optimizer_.kind == OptimizerConfig::Kind::AdamW};
      attrs["step"] = std::int64_t{0};
    }
    std::vector<ValueId> inputs = {master, grads[i], scale};
    inputs.insert(inputs.end(), state.begin(), state.end());
    std::vector<TensorType> types(1 + state.size(), type);
    auto updated = emitMulti(sgd ? OpKind::SgdUpdate : OpKind::AdamUpdate, inputs, types, attrs);
    if (mixed) {
      result.writeBacks.push_back({castTo(updated[0], typeOf(w).dtype), w});
      stateWriteBacks.push_back({updated[0], master});
    } else {
      result.writeBacks.push_back({updated[0], w});
    }
    for (std::size_t j = 0; j < state.size(); ++j)
      stateWriteBacks.push_back({updated[j + 1], state[j]});
  }
  updateLossScale(scale, stateWriteBacks);
  result.writeBacks.insert(result.writeBacks.end(), stateWriteBacks.begin(), stateWriteBacks.end());
  graph_.outputs = {loss};
  for (const WriteBack& wb : result.writeBacks) graph_.outputs.push_back(wb.updated);
  result.graph = std::move(graph_);
  return result;
}

}  // namespace

TrainingGraph buildTrainingGraph(const ir::Graph& forward, const OptimizerConfig& optimizer) {
  return TrainingGraphBuilder(forward, optimizer).build();
}

}  // namespace meshflow::passes
