// Half-precision operands for the f32 kernels: every kernel computes in f32
// (matmuls and reductions accumulate in f32 or wider), so an op with f16 or
// bf16 operands runs its f32 kernel on widened copies and rounds each result
// to its output's dtype once — what a GPU's tensor cores do with half inputs
// and an f32 accumulator. i32 operands (labels, token ids) pass unchanged.
#include <fmt/format.h>

#include <functional>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

bool isHalf(ir::DType dtype) { return dtype == ir::DType::F16 || dtype == ir::DType::BF16; }

// Whether an output already says its dtype (an executor's placeholder, or an
// allocated tensor written in place).
bool typed(const Tensor& t) { return t.allocated() || t.isPlaceholder(); }

// The dtype an untyped output of `op` gets when its inputs are half: the loss
// of CrossEntropy and the norm of GlobalNorm stay f32 by the IR's contract;
// every other op keeps the precision of its first floating-point input.
ir::DType untypedOutputDType(const ir::Op& op, const std::vector<const Tensor*>& inputs) {
  if (op.kind == ir::OpKind::CrossEntropy || op.kind == ir::OpKind::GlobalNorm)
    return ir::DType::F32;
  for (const Tensor* t : inputs)
    if (t && t->allocated() && t->dtype() != ir::DType::I32) return t->dtype();
  return ir::DType::F32;
}

}  // namespace

bool hasHalfOperand(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs) {
  for (const Tensor* t : inputs)
    if (t && t->allocated() && isHalf(t->dtype())) return true;
  for (const Tensor* t : outputs)
    if (t && typed(*t) && isHalf(t->dtype())) return true;
  return false;
}

void runWidened(void (*kernel)(const KernelArgs&), const ir::Op& op,
                const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
                const KernelContext& ctx) {
  runWidenedWith([kernel](const KernelArgs& args) { kernel(args); },
                 [](const Tensor& t, ir::DType dtype) { return t.castTo(dtype); }, op, inputs, outputs, ctx);
}

void runWidenedWith(const std::function<void(const KernelArgs&)>& kernel, const FloatConversion& convert,
                    const ir::Op& op, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
                    const KernelContext& ctx) {
  std::vector<Tensor> wideInputs(inputs.size());
  std::vector<const Tensor*> in;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const Tensor* t = inputs[i];
    if (t && t->allocated() && isHalf(t->dtype())) {
      wideInputs[i] = convert(*t, ir::DType::F32);
      t = &wideInputs[i];
    }
    in.push_back(t);
  }
  // Each output computed as f32 (of the shape the caller expects, if it says),
  // then rounded to the dtype the caller asked for.
  std::vector<Tensor> wideOutputs(outputs.size());
  std::vector<Tensor*> out;
  std::vector<ir::DType> target(outputs.size(), untypedOutputDType(op, inputs));
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    if (outputs[j] && typed(*outputs[j])) {
      target[j] = outputs[j]->dtype();
      wideOutputs[j] = Tensor::placeholder(target[j] == ir::DType::I32 ? target[j] : ir::DType::F32,
                                           outputs[j]->shape());
    }
    out.push_back(outputs[j] ? &wideOutputs[j] : nullptr);
  }
  kernel(KernelArgs(op, in, out, ctx));
  for (std::size_t j = 0; j < outputs.size(); ++j) {
    if (!outputs[j]) continue;
    Tensor& result = wideOutputs[j];
    *outputs[j] = result.dtype() == ir::DType::I32 ? std::move(result) : convert(result, target[j]);
  }
}

ir::DType castTarget(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  auto it = args.op.attrs.find("dtype");
  const auto* name = it == args.op.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
  std::optional<ir::DType> dtype = name ? ir::parseDType(*name) : std::nullopt;
  if (!dtype || *dtype == ir::DType::I32 || *dtype == ir::DType::I64 || x.dtype() == ir::DType::I32)
    args.fail(
        fmt::format("casts between float types, not {} to {}", x.typeText(), name ? *name : "?"));
  const Tensor& y = args.rawOut(0);
  if ((y.allocated() || y.isPlaceholder()) && (y.dtype() != *dtype || y.shape() != x.shape()))
    args.fail(fmt::format("output 0 is {}{} but the cast makes {}{}", ir::dtypeName(y.dtype()),
                          shapeText(y.shape()), *name, shapeText(x.shape())));
  return *dtype;
}

// Cast: x -> y of the `dtype` attribute, rounded to nearest even (f16
// overflows to infinity); the gradient of a cast is a cast back.
void cast(const KernelArgs& args) {
  const ir::DType dtype = castTarget(args);
  args.rawOut(0) = args.in(0).castTo(dtype);  // to the same dtype: shares x's elements (copy on write)
}

}  // namespace meshflow::runtime::cpu
