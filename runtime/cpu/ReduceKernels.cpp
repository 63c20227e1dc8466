// Reductions (Sum, Mean), the gradient of broadcasting (ReduceToShape) and the
// gradient of reducing (BroadcastTo). Sums accumulate in double in the
// row-major order of the larger tensor.
#include <fmt/format.h>

#include <algorithm>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

// Axes as a mask over `rank` dimensions; absent `axes` means every axis.
std::vector<bool> axesMask(const KernelArgs& args, std::size_t rank) {
  std::vector<bool> mask(rank, !args.hasAttr("axes"));
  if (args.hasAttr("axes"))
    for (auto a : args.intsAttr("axes")) mask[args.axis(a, rank)] = true;
  return mask;
}

// Sums src (walked over srcShape) into a dst of `dstSize` elements at the
// offsets `dstStrides` give, then writes dst · factor.
void sumInto(const Tensor& src, const std::vector<std::int64_t>& dstStrides, Tensor& dst,
             double factor) {
  std::vector<double> acc(static_cast<std::size_t>(dst.elements()), 0.0);
  const float* in = src.f32().data();
  walk(src.shape(), dstStrides, dstStrides, [&](std::int64_t i, std::int64_t d, std::int64_t) {
    acc[static_cast<std::size_t>(d)] += in[i];
  });
  auto out = dst.f32();
  for (std::size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i] * factor);
}

bool isHalf(ir::DType dtype) { return dtype == ir::DType::F16 || dtype == ir::DType::BF16; }

// Input 0 of any float type: the cpu kernels see f32 (runKernel widens half
// operands), the cuda backend's sums and copies read f16/bf16 as they are.
const Tensor& floatInput(const KernelArgs& args) {
  const Tensor& x = args.in(0);
  return isHalf(x.dtype()) ? x : args.f32(0);
}

// The type the caller gave output 0 if it is a float type, else x's (the
// type widening gives an untyped output); any other type fails in `out`.
ir::DType resultType(const KernelArgs& args, const Tensor& x) {
  const Tensor& y = args.rawOut(0);
  if (!(y.allocated() || y.isPlaceholder())) return x.dtype();
  return y.dtype() == ir::DType::F32 || isHalf(y.dtype()) ? y.dtype() : ir::DType::F32;
}

}  // namespace

SumPlan sumPlan(const KernelArgs& args) {
  args.expectArity(2 - (args.op.kind == ir::OpKind::ReduceToShape ? 0 : 1), 1);
  const Tensor& x = floatInput(args);
  const ir::DType yType = resultType(args, x);
  if (args.op.kind == ir::OpKind::ReduceToShape) {
    const Tensor& like = args.in(1);
    auto target = broadcastShapes(like.shape(), x.shape());
    if (like.rank() > x.rank() || !target || *target != x.shape())
      args.fail(fmt::format("{} does not broadcast to dy {}", like.typeText(), x.typeText()));
    Tensor& dx = args.out(0, yType, like.shape());
    return {&x, &dx, broadcastStrides(like.shape(), x.shape()), 1.0};
  }
  auto mask = axesMask(args, x.rank());
  Shape yShape;
  std::int64_t reduced = 1;
  for (std::size_t d = 0; d < x.rank(); ++d) {
    if (mask[d])
      reduced *= x.shape()[d];
    else
      yShape.push_back(x.shape()[d]);
  }
  Tensor& y = args.out(0, yType, yShape);
  // Destination strides over x's dimensions: 0 along the reduced axes.
  auto yStrides = rowMajorStrides(yShape);
  std::vector<std::int64_t> dstStrides(x.rank(), 0);
  for (std::size_t d = 0, k = 0; d < x.rank(); ++d)
    if (!mask[d]) dstStrides[d] = yStrides[k++];
  const bool mean = args.op.kind == ir::OpKind::Mean;
  return {&x, &y, std::move(dstStrides), mean ? 1.0 / static_cast<double>(reduced) : 1.0};
}

StridedCopy broadcastCopy(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& x = floatInput(args);
  const Tensor& like = args.in(1);
  std::vector<std::int64_t> strides;
  if (args.hasAttr("axes")) {
    // x is like's shape with `axes` removed, or kept with size 1.
    auto mask = axesMask(args, like.rank());
    Shape removed, ones;
    for (std::size_t d = 0; d < like.rank(); ++d) {
      if (!mask[d]) removed.push_back(like.shape()[d]);
      ones.push_back(mask[d] ? 1 : like.shape()[d]);
    }
    if (x.shape() != removed && x.shape() != ones)
      args.fail(fmt::format("{} is not {} reduced over the axes", x.typeText(), like.typeText()));
    auto xStrides = rowMajorStrides(x.shape());
    strides.assign(like.rank(), 0);
    for (std::size_t d = 0, k = 0; d < like.rank(); ++d) {
      if (x.shape() == ones)
        strides[d] = mask[d] ? 0 : xStrides[d];
      else if (!mask[d])
        strides[d] = xStrides[k++];
    }
  } else {
    auto target = broadcastShapes(x.shape(), like.shape());
    if (x.rank() > like.rank() || !target || *target != like.shape())
      args.fail(fmt::format("{} does not broadcast to {}", x.typeText(), like.typeText()));
    strides = broadcastStrides(x.shape(), like.shape());
  }
  Tensor& y = args.out(0, x.dtype(), like.shape());  // a copy: x's type
  return {&x, &y, like.shape(), std::move(strides), rowMajorStrides(like.shape()), 0, 0, false};
}

// Sum, Mean and ReduceToShape.
void reduce(const KernelArgs& args) {
  const SumPlan p = sumPlan(args);
  sumInto(*p.src, p.dstStrides, *p.dst, p.factor);
}

void reduceToShape(const KernelArgs& args) { reduce(args); }

void broadcastTo(const KernelArgs& args) {
  const StridedCopy c = broadcastCopy(args);
  const float* in = c.src->f32().data();
  float* out = c.dst->f32().data();
  walk(c.shape, c.srcStrides, c.srcStrides, [&](std::int64_t i, std::int64_t s, std::int64_t) { out[i] = in[s]; });
}

}  // namespace meshflow::runtime::cpu
