// The layout ops as strided copies (KernelSupport.h): the argument checks and
// output shapes of transpose, concat, split and the attention heads' layout,
// shared by the cpu kernels (ShapeKernels.cpp) and the cuda backend, which run
// the copies on their own memory. Any element type: the copies move elements.
#include <fmt/format.h>

#include <numeric>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

// True when `perm` swaps the last two axes and keeps the others in place.
bool swapsLastTwo(const std::vector<std::size_t>& perm) {
  std::size_t r = perm.size();
  if (r < 2 || perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return false;
  for (std::size_t i = 0; i + 2 < r; ++i)
    if (perm[i] != i) return false;
  return true;
}

std::vector<std::int64_t> permuted(const std::vector<std::int64_t>& values, const std::vector<std::size_t>& perm) {
  std::vector<std::int64_t> result;
  for (auto p : perm) result.push_back(values[p]);
  return result;
}

// A copy filling all of `dst` (row-major) from `src` read with `srcStrides`.
StridedCopy fill(const Tensor& src, Tensor& dst, const Shape& shape, std::vector<std::int64_t> srcStrides,
                 std::int64_t srcBase = 0) {
  return {&src, &dst, shape, std::move(srcStrides), rowMajorStrides(shape), srcBase, 0, false};
}

std::vector<StridedCopy> transposeCopies(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  auto permAttr = args.intsAttr("perm");
  if (permAttr.size() != x.rank()) args.fail(fmt::format("perm has {} entries for {}", permAttr.size(), x.typeText()));
  std::vector<std::size_t> perm;
  std::vector<bool> seen(x.rank(), false);
  for (auto p : permAttr) {
    std::size_t axis = args.axis(p, x.rank());
    if (seen[axis]) args.fail("perm is not a permutation");
    seen[axis] = true;
    perm.push_back(axis);
  }
  Shape yShape = permuted(x.shape(), perm);
  Tensor& y = args.out(0, x.dtype(), yShape);
  StridedCopy copy = fill(x, y, yShape, permuted(rowMajorStrides(x.shape()), perm));
  copy.swapsLastTwo = swapsLastTwo(perm);  // the weight gradients' transposes
  return {copy};
}

std::vector<StridedCopy> concatCopies(const KernelArgs& args) {
  if (args.inputCount() == 0 || args.outputCount() != 1) args.fail("expects one or more inputs and one output");
  const Tensor& first = args.in(0);
  std::size_t axis = args.axis(args.intAttr("axis"), first.rank());
  Shape yShape = first.shape();
  yShape[axis] = 0;
  for (std::size_t i = 0; i < args.inputCount(); ++i) {
    const Tensor& x = args.in(i);
    if (x.dtype() != first.dtype() || x.rank() != first.rank() ||
        dropAxis(x.shape(), axis) != dropAxis(first.shape(), axis))
      args.fail(fmt::format("input {} {} does not fit input 0 {} along axis {}", i, x.typeText(), first.typeText(),
                            axis));
    yShape[axis] += x.shape()[axis];
  }
  Tensor& y = args.out(0, first.dtype(), yShape);
  auto yStrides = rowMajorStrides(yShape);
  std::vector<StridedCopy> copies;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < args.inputCount(); ++i) {
    const Tensor& x = args.in(i);
    copies.push_back({&x, &y, x.shape(), rowMajorStrides(x.shape()), yStrides, 0, offset * yStrides[axis], false});
    offset += x.shape()[axis];
  }
  return copies;
}

std::vector<StridedCopy> splitCopies(const KernelArgs& args) {
  if (args.inputCount() != 1 || args.outputCount() == 0) args.fail("expects one input and one or more outputs");
  const Tensor& x = args.in(0);
  std::size_t axis = args.axis(args.intAttr("axis"), x.rank());
  std::vector<std::int64_t> sizes;
  if (args.hasAttr("sizes")) {
    sizes = args.intsAttr("sizes");
  } else {
    // Without sizes the split is into equal parts, one per output.
    auto parts = static_cast<std::int64_t>(args.outputCount());
    if (x.shape()[axis] % parts != 0)
      args.fail(fmt::format("cannot split {} into {} equal parts", x.typeText(), parts));
    sizes.assign(args.outputCount(), x.shape()[axis] / parts);
  }
  if (sizes.size() != args.outputCount() ||
      std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0}) != x.shape()[axis])
    args.fail(fmt::format("sizes {} do not split {} along axis {} into {} outputs", shapeText(sizes), x.typeText(),
                          axis, args.outputCount()));
  auto xStrides = rowMajorStrides(x.shape());
  std::vector<StridedCopy> copies;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Shape yShape = x.shape();
    yShape[axis] = sizes[i];
    Tensor& y = args.out(i, x.dtype(), yShape);
    copies.push_back(fill(x, y, yShape, xStrides, offset * xStrides[axis]));
    offset += sizes[i];
  }
  return copies;
}

std::vector<StridedCopy> splitHeadsCopies(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  std::int64_t heads = args.intAttr("heads");
  if (x.rank() != 3 || heads <= 0 || x.dim(2) % heads != 0)
    args.fail(fmt::format("cannot split {} into {} heads", x.typeText(), heads));
  std::int64_t b = x.dim(0), s = x.dim(1), d = x.dim(2) / heads;
  // x viewed as [b, s, heads, d], read in the order of y = [b, heads, s, d].
  Shape yShape = {b, heads, s, d};
  Tensor& y = args.out(0, x.dtype(), yShape);
  return {fill(x, y, yShape, {s * heads * d, d, heads * d, 1})};
}

std::vector<StridedCopy> mergeHeadsCopies(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  if (x.rank() != 4) args.fail("needs x[b, heads, s, d], got " + x.typeText());
  std::int64_t b = x.dim(0), heads = x.dim(1), s = x.dim(2), d = x.dim(3);
  Tensor& y = args.out(0, x.dtype(), {b, s, heads * d});
  // Walk y viewed as [b, s, heads, d], reading x = [b, heads, s, d].
  return {fill(x, y, {b, s, heads, d}, {heads * s * d, d, s * d, 1})};
}

}  // namespace

bool isLayoutOp(ir::OpKind kind) {
  using K = ir::OpKind;
  return kind == K::Transpose || kind == K::Concat || kind == K::Split || kind == K::SplitHeads ||
         kind == K::MergeHeads;
}

std::vector<StridedCopy> layoutCopies(const KernelArgs& args) {
  switch (args.op.kind) {
    case ir::OpKind::Transpose: return transposeCopies(args);
    case ir::OpKind::Concat: return concatCopies(args);
    case ir::OpKind::Split: return splitCopies(args);
    case ir::OpKind::SplitHeads: return splitHeadsCopies(args);
    case ir::OpKind::MergeHeads: return mergeHeadsCopies(args);
    default: args.fail("is not a layout op");
  }
}

}  // namespace meshflow::runtime::cpu
