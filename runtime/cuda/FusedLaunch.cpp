// launchFused (OpLaunch.h): a fused group's one launch. kSoftmax is Kernels.h's
// softmax with the group's scale and mask; the others are FusedKernels.h's.
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

}  // namespace

void launchFused(const FusedGroup& group, const std::vector<const Tensor*>& inputs, std::vector<Tensor*>& outputs,
                 const GpuContext& gpu) {
  const Tensor& x = *inputs.at(0);
  const FloatFormat format = formatOf(x.dtype());
  const auto scale = static_cast<float>(group.scale);
  switch (group.pattern) {
    case FusedPattern::kSoftmax: {
      const Rows rows = rowsOf(x);
      return softmax(format, x.deviceData(), output(outputs, 0, x), rows.count, rows.width, scale, group.causal,
                     gpu.stream);
    }
    case FusedPattern::kSoftmaxGrad: {
      const Rows rows = rowsOf(x);
      return scaledMaskedSoftmaxGrad(format, x.deviceData(), inputs.at(1)->deviceData(), output(outputs, 0, x),
                                     rows.count, rows.width, scale, group.causal, gpu.stream);
    }
    case FusedPattern::kBiasGelu: {
      void* z = output(outputs, 0, x);
      return biasGelu(format, x.deviceData(), inputs.at(1)->deviceData(), z, output(outputs, 1, x), x.elements(),
                      x.dim(-1), gpu.stream);
    }
  }
}

}  // namespace meshflow::runtime::cuda
