#include "runtime/cuda/KernelPlacement.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <variant>

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cuda/TrainingKernels.h"

namespace meshflow::runtime::cuda {
namespace {

bool allocated(const std::vector<const Tensor*>& inputs) {
  return std::all_of(inputs.begin(), inputs.end(), [](const Tensor* t) { return t && t->allocated(); });
}

// Every input is a float (f32, f16, bf16: half ones are widened on the GPU)
// or an i32 (ids, labels).
bool supportedTypes(const std::vector<const Tensor*>& inputs) {
  return std::all_of(inputs.begin(), inputs.end(), [](const Tensor* t) { return t->dtype() != ir::DType::I64; });
}

// A cast between two different float types (the same type shares the elements on the host).
bool convertingCast(const ir::Op& op, const std::vector<const Tensor*>& in) {
  auto it = op.attrs.find("dtype");
  const auto* name = it == op.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
  const std::optional<ir::DType> to = name ? ir::parseDType(*name) : std::nullopt;
  const auto isFloat = [](ir::DType d) { return d == ir::DType::F32 || d == ir::DType::F16 || d == ir::DType::BF16; };
  return in.size() == 1 && to && isFloat(*to) && isFloat(in[0]->dtype()) && *to != in[0]->dtype();
}

// The dtypes of the outputs whose caller fixed one all equal `dtype`.
bool outputsAre(const std::vector<Tensor*>& outputs, ir::DType dtype) {
  return std::all_of(outputs.begin(), outputs.end(), [dtype](const Tensor* t) {
    return !t || !(t->allocated() || t->isPlaceholder()) || t->dtype() == dtype;
  });
}

// Operands of one float type; y of theirs or, from half operands, f32.
bool gemmOperands(const std::vector<const Tensor*>& in, const std::vector<Tensor*>& out) {
  return in.size() == 2 && in[0]->dtype() == in[1]->dtype() && in[0]->dtype() != ir::DType::I32 &&
         (outputsAre(out, in[0]->dtype()) || outputsAre(out, ir::DType::F32));
}

bool gpuKind(ir::OpKind kind) {
  using K = ir::OpKind;
  switch (kind) {
    case K::Add: case K::Sub: case K::Mul: case K::Div:
    case K::Neg: case K::Relu: case K::Gelu: case K::Tanh: case K::Sigmoid: case K::Exp: case K::Scale:
    case K::ReluGrad: case K::GeluGrad: case K::TanhGrad: case K::SigmoidGrad:
    case K::Dropout: case K::DropoutGrad: case K::CausalMask: case K::CausalMaskGrad:
    case K::Softmax: case K::SoftmaxGrad: case K::LayerNorm: case K::LayerNormGrad:
    case K::CrossEntropy: case K::CrossEntropyGrad: case K::Embedding: case K::EmbeddingGrad:
    case K::ReduceToShape: case K::Sum: case K::Mean: case K::BroadcastTo:
    case K::GlobalNorm: case K::SgdUpdate: case K::AdamUpdate:
      return true;
    default:
      return false;
  }
}

// A NaN scale tells an update to skip the step (an f16 gradient overflowed):
// the cpu kernel keeps the old state, as it does on the host.
bool skipsStep(const ir::Op& op, const std::vector<const Tensor*>& in) {
  if (op.kind != ir::OpKind::SgdUpdate && op.kind != ir::OpKind::AdamUpdate) return false;
  return in.size() > 2 && in[2]->dtype() == ir::DType::F32 && in[2]->elements() == 1 && std::isnan(in[2]->f32()[0]);
}

}  // namespace

Placement placementOf(const ir::Op& op, const std::vector<const Tensor*>& inputs,
                      const std::vector<Tensor*>& outputs) {
  if (!allocated(inputs)) return Placement::kHost;  // the cpu kernel names what is missing
  for (const Tensor* t : inputs)
    if (t->rank() > static_cast<std::size_t>(kMaxRank)) return Placement::kHost;
  if (op.kind == ir::OpKind::MatMul) return gemmOperands(inputs, outputs) ? Placement::kGpu : Placement::kHost;
  if (op.kind == ir::OpKind::Cast) return convertingCast(op, inputs) ? Placement::kGpu : Placement::kHost;
  if (cpu::isLayoutOp(op.kind)) return supportedTypes(inputs) ? Placement::kGpu : Placement::kHost;
  if (!gpuKind(op.kind) || !supportedTypes(inputs) || skipsStep(op, inputs)) return Placement::kHost;
  return Placement::kGpu;
}

}  // namespace meshflow::runtime::cuda
