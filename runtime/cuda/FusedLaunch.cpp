// launchFused (OpLaunch.h): a fused group's one launch. kSoftmax is Kernels.h's
// softmax with the group's scale and mask; the others are FusedKernels.h's.
// CudaKernels::runFused declines operands of rank over kMaxRank, which a
// chain's index could not walk.
#include "runtime/cpu/FusedKernels.h"
#include "runtime/cuda/FusedKernels.h"
#include "runtime/cuda/OpLaunch.h"

namespace meshflow::runtime::cuda {
namespace {

// Output k of the group, allocated like the inputs' first (null when nobody reads it).
void* output(std::vector<Tensor*>& outputs, std::size_t k, const Tensor& like) {
  Tensor* t = outputs.at(k);
  if (!t) return nullptr;
  *t = Tensor::uninitialized(like.dtype(), like.shape());
  return t->deviceData();
}

struct Rows {
  std::int64_t count = 0, width = 0;
};

Rows rowsOf(const Tensor& x) {
  const std::int64_t width = x.dim(-1);
  return {width == 0 ? 0 : x.elements() / width, width};
}

// The chain's steps, operands and their broadcast strides as the kernel walks them.
ElementwiseChain chainOf(const FusedGroup& group, const std::vector<const Tensor*>& inputs,
                         const Shape& shape) {
  ElementwiseChain c;
  c.steps = static_cast<int>(group.steps.size());
  for (std::size_t s = 0; s < group.steps.size(); ++s) {
    const ChainStep& step = group.steps[s];
    ChainKernelStep& k = c.step[s];
    k.binary = binaryOp(step.kind);
    if (k.binary)
      k.binaryKind = binaryKind(step.kind);
    else
      k.unaryKind = unaryKind(step.kind);
    k.factor = static_cast<float>(step.factor);
    k.other = step.other;
    k.chainOnRight = step.chainOnRight;
  }
  c.operands = static_cast<int>(inputs.size());
  c.rank = static_cast<int>(shape.size());
  for (std::size_t d = 0; d < shape.size(); ++d) c.shape[d] = shape[d];
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    c.operand[k] = inputs[k]->deviceData();
    const auto strides = cpu::broadcastStrides(inputs[k]->shape(), shape);
    for (std::size_t d = 0; d < shape.size(); ++d) c.strides[k][d] = strides[d];
  }
  return c;
}

}  // namespace

void launchFused(const FusedGroup& group, const std::vector<const Tensor*>& inputs,
                 std::vector<Tensor*>& outputs, const GpuContext& gpu) {
  const Tensor& x = *inputs.at(0);
  const FloatFormat format = formatOf(x.dtype());
  const auto scale = static_cast<float>(group.scale);
  switch (group.pattern) {
    case FusedPattern::kSoftmax: {
      const Rows rows = rowsOf(x);
      return softmax(format, x.deviceData(), output(outputs, 0, x), rows.count, rows.width, scale,
                     group.causal, gpu.stream);
    }
    case FusedPattern::kSoftmaxGrad: {
      const Rows rows = rowsOf(x);
      return scaledMaskedSoftmaxGrad(format, x.deviceData(), inputs.at(1)->deviceData(),
                                     output(outputs, 0, x), rows.count, rows.width, scale,
                                     group.causal, gpu.stream);
    }
    case FusedPattern::kBiasGelu: {
      void* z = output(outputs, 0, x);
      return biasGelu(format, x.deviceData(), inputs.at(1)->deviceData(), z, output(outputs, 1, x),
                      x.elements(), x.dim(-1), gpu.stream);
    }
    case FusedPattern::kElementwise: {
      const Shape shape = *cpu::fusedChainShape(group, inputs);
      Tensor& y = *outputs.at(0);
      y = Tensor::uninitialized(x.dtype(), shape);
      return elementwiseChain(format, chainOf(group, inputs, shape), y.deviceData(), y.elements(),
                              gpu.stream);
    }
  }
}

}  // namespace meshflow::runtime::cuda
