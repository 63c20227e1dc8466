// runKernel's dispatch and the helpers every kernel family shares.
#include <fmt/format.h>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

using Kernel = void (*)(const KernelArgs&);

Kernel kernelFor(ir::OpKind kind) {
  using K = ir::OpKind;
  switch (kind) {
    case K::Input:
    case K::Parameter:
      return nullptr;
    case K::Constant:
      return constant;
    case K::MatMul:
      return matMul;
    case K::Add:
    case K::Sub:
    case K::Mul:
    case K::Div:
      return binary;
    case K::Neg:
    case K::Relu:
    case K::Gelu:
    case K::Tanh:
    case K::Sigmoid:
    case K::Exp:
    case K::Rsqrt:
    case K::Scale:
      return unary;
    case K::Cast:
      return cast;
    case K::Softmax:
      return softmax;
    case K::LayerNorm:
      return layerNorm;
    case K::Embedding:
      return embedding;
    case K::CrossEntropy:
      return crossEntropy;
    case K::Reshape:
      return reshape;
    case K::Transpose:
      return transpose;
    case K::Concat:
      return concat;
    case K::Split:
      return split;
    case K::Sum:
    case K::Mean:
      return reduce;
    case K::Dropout:
      return dropout;
    case K::SplitHeads:
      return splitHeads;
    case K::MergeHeads:
      return mergeHeads;
    case K::CausalMask:
      return causalMask;
    case K::TopKGate:
      return topKGate;
    case K::Select:
      return select;
    case K::MoeDispatch:
      return moeDispatch;
    case K::MoeCombine:
      return moeCombine;
    case K::MoeDropped:
      return moeDropped;
    case K::ReduceToShape:
      return reduceToShape;
    case K::ReluGrad:
    case K::GeluGrad:
    case K::TanhGrad:
    case K::SigmoidGrad:
      return unaryGrad;
    case K::SoftmaxGrad:
      return softmaxGrad;
    case K::LayerNormGrad:
      return layerNormGrad;
    case K::EmbeddingGrad:
      return embeddingGrad;
    case K::CrossEntropyGrad:
      return crossEntropyGrad;
    case K::DropoutGrad:
      return dropoutGrad;
    case K::CausalMaskGrad:
      return causalMask;
    case K::TopKGateGrad:
      return topKGateGrad;
    case K::SelectGrad:
      return selectGrad;
    case K::MoeDispatchGrad:
      return moeDispatchGrad;
    case K::MoeCombineGrad:
      return moeCombineGrad;
    case K::BroadcastTo:
      return broadcastTo;
    case K::GlobalNorm:
      return globalNorm;
    case K::ClipScale:
      return clipScale;
    case K::SgdUpdate:
      return sgdUpdate;
    case K::AdamUpdate:
      return adamUpdate;
    case K::LossScaleUpdate:
      return lossScaleUpdate;
  }
  return nullptr;
}

}  // namespace

void runKernel(const ir::Op& op, const std::vector<const Tensor*>& inputs,
               std::vector<Tensor*>& outputs, const KernelContext& ctx) {
  Kernel kernel = kernelFor(op.kind);
  if (!kernel)
    throw KernelError(fmt::format("{} has no kernel: the executor binds it", ir::opName(op.kind)));
  // Cast converts by itself, Reshape and the layout ops move elements of any
  // type (widening and rounding back would give the same bits, slower: on a
  // GPU's managed memory a widened reshape paged the tensor to the host and
  // back); every other kernel computes in f32.
  const bool anyType = op.kind == ir::OpKind::Cast || op.kind == ir::OpKind::Reshape || isLayoutOp(op.kind);
  if (!anyType && hasHalfOperand(inputs, outputs))
    return runWidened(kernel, op, inputs, outputs, ctx);
  kernel(KernelArgs(op, inputs, outputs, ctx));
}

void KernelArgs::fail(const std::string& message) const {
  throw KernelError(fmt::format("{}: {}", ir::opName(op.kind), message));
}

void KernelArgs::expectArity(std::size_t inputs, std::size_t outputs) const {
  if (inputs_.size() != inputs || outputs_.size() != outputs)
    fail(fmt::format("expects {} inputs and {} outputs, got {} and {}", inputs, outputs,
                     inputs_.size(), outputs_.size()));
}

const Tensor& KernelArgs::in(std::size_t i) const {
  if (i >= inputs_.size() || !inputs_[i] || !inputs_[i]->allocated())
    fail(fmt::format("input {} is missing", i));
  return *inputs_[i];
}

const Tensor& KernelArgs::f32(std::size_t i) const {
  const Tensor& t = in(i);
  if (t.dtype() != ir::DType::F32)
    fail(fmt::format("input {} must be f32, got {}", i, t.typeText()));
  return t;
}

const Tensor& KernelArgs::i32(std::size_t i) const {
  const Tensor& t = in(i);
  if (t.dtype() != ir::DType::I32)
    fail(fmt::format("input {} must be i32, got {}", i, t.typeText()));
  return t;
}

Tensor& KernelArgs::rawOut(std::size_t i) const {
  if (i >= outputs_.size() || !outputs_[i]) fail(fmt::format("output {} is missing", i));
  return *outputs_[i];
}

Tensor& KernelArgs::out(std::size_t i, ir::DType dtype, const Shape& shape) const {
  Tensor& t = rawOut(i);
  if ((t.allocated() || t.isPlaceholder()) && (t.dtype() != dtype || t.shape() != shape))
    fail(fmt::format("output {} is {}{} but the kernel computes {}{}", i, ir::dtypeName(t.dtype()),
                     shapeText(t.shape()), ir::dtypeName(dtype), shapeText(shape)));
  if (!t.allocated()) t = Tensor::uninitialized(dtype, shape);  // the kernel writes every element
  return t;
}

std::int64_t KernelArgs::intAttr(const std::string& name,
                                 std::optional<std::int64_t> fallback) const {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) {
    if (!fallback) fail("missing attribute `" + name + "`");
    return *fallback;
  }
  if (const auto* v = std::get_if<std::int64_t>(&it->second)) return *v;
  fail("attribute `" + name + "` must be an integer");
}

double KernelArgs::doubleAttr(const std::string& name, std::optional<double> fallback) const {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) {
    if (!fallback) fail("missing attribute `" + name + "`");
    return *fallback;
  }
  if (const auto* v = std::get_if<double>(&it->second)) return *v;
  if (const auto* v = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*v);
  fail("attribute `" + name + "` must be a number");
}

std::vector<std::int64_t> KernelArgs::intsAttr(const std::string& name) const {
  auto it = op.attrs.find(name);
  if (it == op.attrs.end()) fail("missing attribute `" + name + "`");
  if (const auto* v = std::get_if<std::vector<std::int64_t>>(&it->second)) return *v;
  // A one-element list may have been written as a single integer.
  if (const auto* v = std::get_if<std::int64_t>(&it->second)) return {*v};
  fail("attribute `" + name + "` must be a list of integers");
}

std::size_t KernelArgs::axis(std::int64_t axis, std::size_t rank) const {
  auto r = static_cast<std::int64_t>(rank);
  if (axis < -r || axis >= r) fail(fmt::format("axis {} is out of range for rank {}", axis, r));
  return static_cast<std::size_t>(axis < 0 ? axis + r : axis);
}

std::optional<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  std::size_t rank = std::max(a.size(), b.size());
  Shape result(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    std::int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    std::int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    result[i] = da == 1 ? db : da;
  }
  return result;
}

std::vector<std::int64_t> broadcastStrides(const Shape& shape, const Shape& target) {
  std::vector<std::int64_t> strides(target.size(), 0);
  auto own = rowMajorStrides(shape);
  std::size_t lead = target.size() - shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i)
    strides[lead + i] = shape[i] == 1 && target[lead + i] != 1 ? 0 : own[i];
  return strides;
}

Shape dropAxis(Shape shape, std::size_t axis) {
  shape.erase(shape.begin() + static_cast<std::ptrdiff_t>(axis));
  return shape;
}

double droppedChoices(const ir::Op& dispatch, const Tensor& gates) {
  ir::Op count;
  count.kind = ir::OpKind::MoeDropped;
  count.attrs["capacity"] = dispatch.attrs.at("capacity");
  Tensor dropped;
  std::vector<Tensor*> out{&dropped};
  runKernel(count, {&gates}, out, KernelContext{});
  return dropped.item();
}

}  // namespace meshflow::runtime::cpu
