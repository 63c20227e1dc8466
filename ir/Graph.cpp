#include "ir/Graph.h"

#include <fmt/format.h>

#include <array>
#include <stdexcept>
#include <utility>

namespace meshflow::ir {
namespace {

constexpr std::array<std::pair<OpKind, const char*>, 57> kOpNames = {{
    {OpKind::Input, "input"},
    {OpKind::Parameter, "parameter"},
    {OpKind::Constant, "constant"},
    {OpKind::MatMul, "matmul"},
    {OpKind::Add, "add"},
    {OpKind::Sub, "sub"},
    {OpKind::Mul, "mul"},
    {OpKind::Div, "div"},
    {OpKind::Neg, "neg"},
    {OpKind::Relu, "relu"},
    {OpKind::Gelu, "gelu"},
    {OpKind::Tanh, "tanh"},
    {OpKind::Sigmoid, "sigmoid"},
    {OpKind::Exp, "exp"},
    {OpKind::Scale, "scale"},
    {OpKind::Softmax, "softmax"},
    {OpKind::LayerNorm, "layer_norm"},
    {OpKind::Embedding, "embedding"},
    {OpKind::CrossEntropy, "cross_entropy"},
    {OpKind::Reshape, "reshape"},
    {OpKind::Transpose, "transpose"},
    {OpKind::Concat, "concat"},
    {OpKind::Split, "split"},
    {OpKind::Sum, "sum"},
    {OpKind::Mean, "mean"},
    {OpKind::Dropout, "dropout"},
    {OpKind::SplitHeads, "split_heads"},
    {OpKind::MergeHeads, "merge_heads"},
    {OpKind::CausalMask, "causal_mask"},
    {OpKind::TopKGate, "top_k_gate"},
    {OpKind::Select, "select"},
    {OpKind::MoeDispatch, "moe_dispatch"},
    {OpKind::MoeCombine, "moe_combine"},
    {OpKind::MoeDropped, "moe_dropped"},
    {OpKind::Cast, "cast"},
    {OpKind::Rsqrt, "rsqrt"},
    {OpKind::ReduceToShape, "reduce_to_shape"},
    {OpKind::ReluGrad, "relu_grad"},
    {OpKind::GeluGrad, "gelu_grad"},
    {OpKind::TanhGrad, "tanh_grad"},
    {OpKind::SigmoidGrad, "sigmoid_grad"},
    {OpKind::SoftmaxGrad, "softmax_grad"},
    {OpKind::LayerNormGrad, "layer_norm_grad"},
    {OpKind::EmbeddingGrad, "embedding_grad"},
    {OpKind::CrossEntropyGrad, "cross_entropy_grad"},
    {OpKind::DropoutGrad, "dropout_grad"},
    {OpKind::CausalMaskGrad, "causal_mask_grad"},
    {OpKind::TopKGateGrad, "top_k_gate_grad"},
    {OpKind::SelectGrad, "select_grad"},
    {OpKind::MoeDispatchGrad, "moe_dispatch_grad"},
    {OpKind::MoeCombineGrad, "moe_combine_grad"},
    {OpKind::BroadcastTo, "broadcast_to"},
    {OpKind::GlobalNorm, "global_norm"},
    {OpKind::ClipScale, "clip_scale"},
    {OpKind::SgdUpdate, "sgd_update"},
    {OpKind::AdamUpdate, "adam_update"},
    {OpKind::LossScaleUpdate, "loss_scale_update"},
}};

}  // namespace

const char* dtypeName(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
  }
  return "?";
}

std::optional<DType> parseDType(const std::string& name) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64})
    if (name == dtypeName(d)) return d;
  return std::nullopt;
}

std::size_t dtypeBytes(DType dtype) {
  switch (dtype) {
    case DType::F16:
    case DType::BF16: return 2;
    case DType::I64: return 8;
    default: return 4;
  }
}

std::string dimText(const Dim& dim) {
  if (!dim.perBatch) return std::to_string(dim.value);
  return dim.value == 1 ? "batch" : fmt::format("batch*{}", dim.value);
}

bool TensorType::concrete() const {
  for (const auto& d : shape)
    if (d.perBatch) return false;
  return true;
}

std::int64_t TensorType::elements(std::int64_t batchSize) const {
  std::int64_t n = 1;
  for (const auto& d : shape) n *= d.resolve(batchSize);
  return n;
}

std::string TensorType::text() const {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + dimText(shape[i]);
  return fmt::format("{}[{}]", dtypeName(dtype), dims);
}

const char* opName(OpKind kind) {
  for (const auto& [k, name] : kOpNames)
    if (k == kind) return name;
  return "?";
}

std::optional<OpKind> parseOpKind(const std::string& name) {
  for (const auto& [k, n] : kOpNames)
    if (name == n) return k;
  return std::nullopt;
}

const char* phaseName(Phase phase) {
  switch (phase) {
    case Phase::Forward: return "fwd";
    case Phase::Backward: return "bwd";
    case Phase::Update: return "update";
  }
  return "?";
}

OpId Graph::addOp(Op op, const std::vector<TensorType>& outputTypes) {
  auto id = static_cast<OpId>(ops_.size());
  op.outputs.clear();
  for (const auto& type : outputTypes) {
    op.outputs.push_back(static_cast<ValueId>(values_.size()));
    values_.push_back({type, id, ""});
  }
  ops_.push_back(std::move(op));
  return id;
}

Graph Graph::assemble(std::vector<Op> ops, std::vector<ValueInfo> values, std::vector<ValueId> outputs) {
  auto check = [](bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(std::string("a graph whose ") + what);
  };
  for (std::size_t o = 0; o < ops.size(); ++o) {
    for (ValueId v : ops[o].inputs) check(v < values.size(), "op reads a value it does not have");
    for (ValueId v : ops[o].outputs)
      check(v < values.size() && values[v].producer == o, "op makes a value that names another producer");
  }
  for (const ValueInfo& value : values) check(value.producer < ops.size(), "value has no producer");
  for (ValueId v : outputs) check(v < values.size(), "outputs name a value it does not have");
  Graph graph;
  graph.ops_ = std::move(ops);
  graph.values_ = std::move(values);
  graph.outputs = std::move(outputs);
  return graph;
}

bool flagAttr(const Op& op, const std::string& name) {
  auto it = op.attrs.find(name);
  return it != op.attrs.end() && std::get<std::int64_t>(it->second) != 0;
}

std::vector<ValueId> Graph::inputs() const {
  std::vector<ValueId> ids;
  for (const auto& op : ops_)
    if (op.kind == OpKind::Input) ids.push_back(op.outputs.at(0));
  return ids;
}

std::vector<ValueId> Graph::parameters() const {
  std::vector<ValueId> ids;
  for (const auto& op : ops_)
    if (op.kind == OpKind::Parameter) ids.push_back(op.outputs.at(0));
  return ids;
}

std::vector<std::vector<OpId>> Graph::consumers() const {
  std::vector<std::vector<OpId>> result(values_.size());
  for (OpId id = 0; id < ops_.size(); ++id)
    for (ValueId v : ops_[id].inputs) result.at(v).push_back(id);
  return result;
}

}  // namespace meshflow::ir
