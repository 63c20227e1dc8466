#include "runtime/cuda/AttentionLaunch.h"

#include "runtime/cuda/OpLaunch.h"

namespace meshflow::runtime::cuda {
namespace {

bool floatType(ir::DType dtype) { return dtype != ir::DType::I32; }

Shape withoutLast(const Shape& shape) { return Shape(shape.begin(), shape.end() - 1); }

}  // namespace

std::optional<AttentionSizes> attentionSizes(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const cpu::AttentionOptions& options) {
  if (!floatType(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype()) return std::nullopt;
  if (q.rank() < 2 || k.rank() != q.rank() || k.shape() != v.shape()) return std::nullopt;
  if (withoutLast(withoutLast(q.shape())) != withoutLast(withoutLast(k.shape())) || q.dim(-1) != k.dim(-1))
    return std::nullopt;
  AttentionSizes sizes;
  sizes.n = shapeElements(withoutLast(withoutLast(q.shape())));
  sizes.r = q.dim(-2);
  sizes.s = k.dim(-2);
  sizes.d = q.dim(-1);
  sizes.scale = static_cast<float>(options.scale);
  sizes.causal = options.causal;
  if (sizes.d < 1 || sizes.d > kMaxAttentionHeadDim || (sizes.r > 0 && sizes.s == 0)) return std::nullopt;
  if (sizes.causal && sizes.s > 0 && sizes.r % sizes.s != 0) return std::nullopt;
  return sizes;
}

std::optional<AttentionSizes> attentionGradSizes(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& dOut, const Tensor& lse,
                                                 const cpu::AttentionOptions& options) {
  if (dOut.shape() != q.shape() || dOut.dtype() != q.dtype() || lse.dtype() != ir::DType::F32 ||
      lse.shape() != withoutLast(q.shape()))
    return std::nullopt;
  return attentionSizes(q, k, v, options);
}

void launchAttention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSizes& sizes,
                     cpu::AttentionResult& result, Stream stream) {
  result.out = Tensor::uninitialized(q.dtype(), q.shape());
  result.lse = Tensor::uninitialized(ir::DType::F32, withoutLast(q.shape()));
  attentionForward(formatOf(q.dtype()), q.deviceData(), k.deviceData(), v.deviceData(), result.out.deviceData(),
                   static_cast<float*>(result.lse.deviceData()), sizes, stream);
}

void launchAttentionGrad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dOut, const Tensor& lse,
                         const AttentionSizes& sizes, cpu::AttentionGrads& grads, Stream stream) {
  grads.dq = Tensor::uninitialized(q.dtype(), q.shape());
  grads.dk = Tensor::uninitialized(k.dtype(), k.shape());
  grads.dv = Tensor::uninitialized(v.dtype(), v.shape());
  // Scratch: back to the allocator when this returns, reused only by later
  // work on this stream (as launchOp's scratch).
  Tensor rowTerm = Tensor::uninitialized(ir::DType::F32, {sizes.n * sizes.r});
  attentionBackward(formatOf(q.dtype()), q.deviceData(), k.deviceData(), v.deviceData(), dOut.deviceData(),
                    static_cast<const float*>(lse.deviceData()), static_cast<float*>(rowTerm.deviceData()),
                    grads.dq.deviceData(), grads.dk.deviceData(), grads.dv.deviceData(), sizes, stream);
}

}  // namespace meshflow::runtime::cuda
