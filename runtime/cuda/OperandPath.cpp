#include "runtime/cuda/OperandPath.h"

#include <algorithm>
#include <initializer_list>
#include <optional>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cuda {
namespace {

using K = ir::OpKind;
using Inputs = std::vector<const Tensor*>;
using Outputs = std::vector<Tensor*>;

bool isHalf(ir::DType dtype) { return dtype == ir::DType::F16 || dtype == ir::DType::BF16; }
bool isFloat(ir::DType dtype) { return dtype == ir::DType::F32 || isHalf(dtype); }
bool present(const Tensor* t) { return t && t->allocated(); }
// An output whose dtype its caller fixed (a placeholder, or a tensor written in place).
bool typed(const Tensor* t) { return t && (t->allocated() || t->isPlaceholder()); }

// Every output that says its dtype says one `allowed` says.
bool outputsAmong(const Outputs& outputs, std::initializer_list<ir::DType> allowed) {
  return std::all_of(outputs.begin(), outputs.end(), [&](const Tensor* t) {
    return !typed(t) || std::find(allowed.begin(), allowed.end(), t->dtype()) != allowed.end();
  });
}

bool floatOutputs(const Outputs& outputs) {
  return std::all_of(outputs.begin(), outputs.end(), [](const Tensor* t) { return !typed(t) || isFloat(t->dtype()); });
}

// The one half type of inputs [0, count), or nullopt.
std::optional<ir::DType> oneHalfType(const Inputs& in, std::size_t count) {
  if (in.size() < count || count == 0 || !present(in[0]) || !isHalf(in[0]->dtype())) return std::nullopt;
  for (std::size_t i = 0; i < count; ++i)
    if (!present(in[i]) || in[i]->dtype() != in[0]->dtype()) return std::nullopt;
  return in[0]->dtype();
}

bool oneTypeKind(K kind) {
  switch (kind) {
    case K::Add: case K::Sub: case K::Mul: case K::Div:
    case K::Neg: case K::Relu: case K::Gelu: case K::Tanh: case K::Sigmoid: case K::Exp: case K::Scale:
    case K::ReluGrad: case K::GeluGrad: case K::TanhGrad: case K::SigmoidGrad:
    case K::Softmax: case K::SoftmaxGrad: case K::Dropout: case K::DropoutGrad: case K::CausalMask:
    case K::CausalMaskGrad: case K::LayerNorm:
      return true;
    default:
      return false;
  }
}

// Every input and typed output of one half type.
bool oneHalfTypeOp(const Inputs& in, const Outputs& out) {
  const auto dtype = oneHalfType(in, in.size());
  return dtype && outputsAmong(out, {*dtype});
}

// x, gamma, dy of one half type; dx of it, dgamma and dbeta of it or f32.
bool layerNormGradOperands(const Inputs& in, const Outputs& out) {
  const auto dtype = oneHalfType(in, 3);
  if (!dtype || in.size() != 3 || out.size() != 3) return false;
  return outputsAmong({out[0]}, {*dtype}) && outputsAmong({out[1], out[2]}, {*dtype, ir::DType::F32});
}

// Half logits, i32 labels, an f32 dloss; the loss f32, dlogits of the logits' type.
bool halfLogits(K kind, const Inputs& in, const Outputs& out) {
  const bool grad = kind == K::CrossEntropyGrad;
  if (in.size() != (grad ? 3u : 2u) || !std::all_of(in.begin(), in.end(), present)) return false;
  const ir::DType dtype = in[0]->dtype();
  if (!isHalf(dtype) || in[1]->dtype() != ir::DType::I32 || (grad && in[2]->dtype() != ir::DType::F32)) return false;
  return outputsAmong(out, {grad ? dtype : ir::DType::F32});
}

// An embedding of a half table (rows copied as they are), or the gradient
// of one from dy of any float type into a table gradient of any float type.
bool halfTable(K kind, const Inputs& in, const Outputs& out) {
  if (in.size() != 2 || !present(in[0]) || !present(in[1]) || out.size() != 1) return false;
  if (kind == K::Embedding)
    return isHalf(in[0]->dtype()) && in[1]->dtype() == ir::DType::I32 && outputsAmong(out, {in[0]->dtype()});
  return in[0]->dtype() == ir::DType::I32 && isFloat(in[1]->dtype()) && floatOutputs(out);
}

// x of any float type (ReduceToShape's `like` gives only a shape), y of any float type.
bool sumOperands(const Inputs& in, const Outputs& out) {
  return !in.empty() && present(in[0]) && isFloat(in[0]->dtype()) && floatOutputs(out);
}

// A half x copied into y of its type (like gives only a shape).
bool broadcastOperands(const Inputs& in, const Outputs& out) {
  return !in.empty() && present(in[0]) && isHalf(in[0]->dtype()) && outputsAmong(out, {in[0]->dtype()});
}

bool globalNormOperands(const Inputs& in, const Outputs& out) {
  return std::all_of(in.begin(), in.end(), [](const Tensor* t) { return present(t) && isFloat(t->dtype()); }) &&
         outputsAmong(out, {ir::DType::F32});
}

// w, g, the states: any float type each; the scale f32 (read on the host).
bool updateOperands(const Inputs& in, const Outputs& out) {
  for (std::size_t i = 0; i < in.size(); ++i)
    if (!present(in[i]) || !(i == 2 ? in[i]->dtype() == ir::DType::F32 : isFloat(in[i]->dtype()))) return false;
  return in.size() >= 3 && floatOutputs(out);
}

bool asStoredWithHalf(const ir::Op& op, const Inputs& in, const Outputs& out) {
  if (oneTypeKind(op.kind)) return oneHalfTypeOp(in, out);
  switch (op.kind) {
    case K::LayerNormGrad: return layerNormGradOperands(in, out);
    case K::CrossEntropy: case K::CrossEntropyGrad: return halfLogits(op.kind, in, out);
    case K::Embedding: case K::EmbeddingGrad: return halfTable(op.kind, in, out);
    case K::Sum: case K::Mean: case K::ReduceToShape: return sumOperands(in, out);
    case K::BroadcastTo: return broadcastOperands(in, out);
    case K::GlobalNorm: return globalNormOperands(in, out);
    case K::SgdUpdate: case K::AdamUpdate: return updateOperands(in, out);
    default: return false;
  }
}

}  // namespace

OperandPath operandPathOf(const ir::Op& op, const Inputs& inputs, const Outputs& outputs) {
  const bool movesElements = op.kind == K::MatMul || op.kind == K::Cast || cpu::isLayoutOp(op.kind);
  if (movesElements || !cpu::hasHalfOperand(inputs, outputs) || asStoredWithHalf(op, inputs, outputs))
    return OperandPath::kAsStored;
  return OperandPath::kWidened;
}

}  // namespace meshflow::runtime::cuda
