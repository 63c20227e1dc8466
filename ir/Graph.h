// ir::Graph — the tensor program a model traces to, and (after autodiff) the
// training graph: forward, backward and optimizer-update ops. It is the
// contract between tracing (interp/), the passes and the executors.
//
// Conventions
// - A graph is SSA: every value is produced by exactly one op (Input and
//   Parameter ops produce the graph's leaves) and ops are stored in a valid
//   execution order.
// - Shapes are row-major. A dimension is a constant or a multiple of the
//   symbolic batch size (`batch`, `batch*1024`); bind() makes every dim concrete.
// - Elementwise binary ops broadcast NumPy-style over trailing dimensions.
// - Ops carry the scope path of the layer call that made them
//   (`block3.mlp.fc1`), the source location of the .mesh call, and a phase.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace meshflow::ir {

enum class DType : std::uint8_t { F32, F16, BF16, I32, I64 };
const char* dtypeName(DType dtype);  // "f32"
std::optional<DType> parseDType(const std::string& name);
std::size_t dtypeBytes(DType dtype);

/// `value` if constant, else `value * batch`.
struct Dim {
  std::int64_t value = 1;
  bool perBatch = false;

  static Dim constant(std::int64_t v) { return {v, false}; }
  static Dim batch(std::int64_t multiple = 1) { return {multiple, true}; }
  std::int64_t resolve(std::int64_t batchSize) const { return perBatch ? value * batchSize : value; }
  friend bool operator==(const Dim&, const Dim&) = default;
};
std::string dimText(const Dim& dim);  // "1024", "batch", "batch*1024"

struct TensorType {
  DType dtype = DType::F32;
  std::vector<Dim> shape;

  std::size_t rank() const { return shape.size(); }
  bool concrete() const;
  /// Elements with `batch` bound (1 for a scalar).
  std::int64_t elements(std::int64_t batchSize) const;
  std::string text() const;  // "f32[batch, 1024]", "f32[]" for a scalar
  friend bool operator==(const TensorType&, const TensorType&) = default;
};

/// Every op of the IR. Inputs and outputs are listed as `inputs -> outputs`;
/// attributes in braces. Shapes use `...` for any leading dimensions.
enum class OpKind : std::uint8_t {
  // ---- leaves ----
  Input,      // -> x                         {name}
  Parameter,  // -> w                         {name, init: "normal"|"zeros"|"ones", std}
  Constant,   // -> c (f32 scalar)            {value}

  // ---- forward primitives ----
  MatMul,     // a[..., m, k], b[k, n] or b[..., k, n] -> y[..., m, n]   {transpose_a?: 0|1 (a as [..., k, m]), transpose_b?: 0|1 (b as [(...,) n, k])}
  Add,        // a, b -> y   (broadcast)
  Sub,        // a, b -> y   (broadcast)
  Mul,        // a, b -> y   (broadcast)
  Div,        // a, b -> y   (broadcast)
  Neg,        // x -> y
  Relu,       // x -> y
  Gelu,       // x -> y      (tanh approximation)
  Tanh,       // x -> y
  Sigmoid,    // x -> y
  Exp,        // x -> y
  Scale,      // x -> y = x * factor             {factor}
  Softmax,    // x[..., n] -> y[..., n]  (over the last dimension)
  LayerNorm,  // x[..., n], gamma[n], beta[n] -> y[..., n]   {eps}
  Embedding,  // table[V, h], ids[...] (i32) -> y[..., h]
  CrossEntropy,  // logits[..., V], labels[...] (i32) -> loss (f32 scalar, mean over positions)
  Reshape,    // x -> y                          {shape: dims, -1 = inferred}
  Transpose,  // x -> y                          {perm}
  Concat,     // x0, x1, ... -> y                {axis}
  Split,      // x -> y0, y1, ...                {axis, sizes}
  Sum,        // x -> y  (reduce; axes removed)  {axes}
  Mean,       // x -> y  (reduce; axes removed)  {axes}
  Dropout,    // x -> y  (inverted dropout; deterministic mask from seed, step, op index) {p, seed}
  SplitHeads, // x[b, s, heads*d] -> y[b, heads, s, d]   {heads}
  MergeHeads, // x[b, heads, s, d] -> y[b, s, heads*d]
  CausalMask, // scores[..., s, s] -> y (entries above the diagonal set to -1e9)
  TopKGate,   // logits[..., E] -> gates[..., E]: softmax over the k largest, 0 elsewhere {k}
  Select,     // x[..., E] -> y[...]: x[..., index]   {axis = last, index}
  // Mixture of experts with a capacity (docs/graph-ir.md, "Mixture of experts"):
  // each group (a row b of the batch) routes its tokens in order to the experts
  // whose gate is nonzero; an expert takes at most `capacity` tokens per group
  // and drops the rest. Slot c of group b is row b*capacity + c of d.
  MoeDispatch,  // x[B, S, h], gates[B, S, E] -> d[E, B*capacity, h]   {capacity}
  MoeCombine,   // y[E, B*capacity, h], gates[B, S, E] -> out[B, S, h]: Σ_e gate·y at the token's slot {capacity}
  MoeDropped,   // gates[B, S, E] -> n (f32 scalar): (token, expert) choices dropped   {capacity}
  Cast,       // x -> y: the same values in another float dtype, rounded to nearest even {dtype: "f32"|"f16"|"bf16"}
  Rsqrt,      // x -> y = 1 / sqrt(x + eps)      {eps} (RMSNorm's scale)

  // ---- backward (made by autodiff) ----
  ReduceToShape,   // dy, like -> dx: sum dy over broadcast dims to like's shape
  ReluGrad,        // x, dy -> dx
  GeluGrad,        // x, dy -> dx
  TanhGrad,        // y, dy -> dx     (y = tanh(x))
  SigmoidGrad,     // y, dy -> dx     (y = sigmoid(x))
  SoftmaxGrad,     // y, dy -> dx     (y = softmax(x))
  LayerNormGrad,   // x, gamma, dy -> dx, dgamma, dbeta   {eps}
  EmbeddingGrad,   // ids, dy -> dtable[V, h]              {vocab}
  CrossEntropyGrad,// logits, labels, dloss -> dlogits
  DropoutGrad,     // dy -> dx (same mask as the forward op) {p, seed, forward_op}
  CausalMaskGrad,  // dy -> dx (zero above the diagonal)
  TopKGateGrad,    // logits, gates, dgates -> dlogits     {k}
  SelectGrad,      // dy, like -> dx: dy placed at index along axis {axis, index}
  MoeDispatchGrad, // dd[E, B*capacity, h], gates -> dx[B, S, h] (the kept slots gathered back) {capacity}
  MoeCombineGrad,  // y, gates, dout -> dy[E, B*capacity, h], dgates[B, S, E]   {capacity}
  BroadcastTo,     // x, like -> y: x expanded back over reduced axes {axes}

  // ---- optimizer update (made by autodiff) ----
  GlobalNorm,      // g0, g1, ... -> norm (f32 scalar): sqrt(sum of squares)
  ClipScale,       // norm -> s = min(1, clip_norm / (norm + 1e-6))  {clip_norm}
                   // norm, loss_scale -> s = min(1, clip_norm / (norm/loss_scale + 1e-6)) / loss_scale,
                   //   NaN when norm is not finite (an overflow: updates skip); clip_norm 0 = no clipping
  SgdUpdate,       // w, g, scale, m -> w', m'   {lr, momentum, weight_decay}; scale NaN: w' = w, m' = m
  AdamUpdate,      // w, g, scale, m, v -> w', m', v'   {lr, beta1, beta2, eps, weight_decay, decoupled: 0|1, step}
  LossScaleUpdate, // scale, counts[2], factor -> scale', counts': dynamic loss scaling {window}
                   //   counts = [good steps in a row, skipped steps]; factor (ClipScale's) NaN = overflow:
                   //   halve the scale, count a skip; else after `window` good steps double it
};

const char* opName(OpKind kind);  // "matmul", "layer_norm", "adam_update" …
std::optional<OpKind> parseOpKind(const std::string& name);

enum class Phase : std::uint8_t { Forward, Backward, Update };
const char* phaseName(Phase phase);

using Attribute = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>>;
/// Ordered by name, so printing is deterministic.
using Attributes = std::map<std::string, Attribute>;

using ValueId = std::uint32_t;
using OpId = std::uint32_t;

struct Location {
  std::string file;  // empty when unknown
  std::uint32_t line = 0;  // 1-based when known
  std::uint32_t column = 0;
};

struct Op {
  OpKind kind;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attributes attrs;
  std::string scope;  // `block3.mlp.fc1`; "" at the model's top level
  Location location;
  Phase phase = Phase::Forward;
  /// For backward and update ops: the forward op they differentiate or update.
  std::optional<OpId> forwardOp;
};

/// An integer flag attribute (`transpose_b: 1`): true when present and nonzero.
bool flagAttr(const Op& op, const std::string& name);

struct ValueInfo {
  TensorType type;
  OpId producer;
  std::string name;  // parameters and inputs have names; others may be ""
};

class Graph {
 public:
  /// Appends an op producing values of `outputTypes`; returns its id.
  OpId addOp(Op op, const std::vector<TensorType>& outputTypes);
  /// A graph from its ops and values as another process sent them (the mpi
  /// backend's jobs). Throws std::invalid_argument when an op reads or makes
  /// a value it does not have, or a value's producer does not list it.
  static Graph assemble(std::vector<Op> ops, std::vector<ValueInfo> values, std::vector<ValueId> outputs);

  const std::vector<Op>& ops() const { return ops_; }
  std::vector<Op>& ops() { return ops_; }
  const Op& op(OpId id) const { return ops_.at(id); }
  const ValueInfo& value(ValueId id) const { return values_.at(id); }
  ValueInfo& value(ValueId id) { return values_.at(id); }
  std::size_t valueCount() const { return values_.size(); }

  /// The graph's results: the loss for a forward graph; updated parameters
  /// and optimizer state follow it in a training graph.
  std::vector<ValueId> outputs;

  /// Values produced by Input / Parameter ops, in op order.
  std::vector<ValueId> inputs() const;
  std::vector<ValueId> parameters() const;
  /// Ops that read each value (computed on demand).
  std::vector<std::vector<OpId>> consumers() const;

 private:
  std::vector<Op> ops_;
  std::vector<ValueInfo> values_;
};

}  // namespace meshflow::ir
