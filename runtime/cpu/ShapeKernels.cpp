// Ops that move elements without arithmetic: reshape, transpose, concat,
// split, the attention head layout, select and its gradient. They work on f32
// and i32 alike.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <type_traits>

#ifdef __SSE__
#include <xmmintrin.h>
#endif

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

// Walks `shape`, copying src[srcBase + Σ i·srcStrides] to dst[dstBase + Σ i·dstStrides].
// The trailing dimensions that both sides hold contiguously are copied as whole
// rows (the heads' layout changes, concat and split move rows of the last axis).
template <class T>
void copyTyped(const Shape& shape, const T* src, const std::vector<std::int64_t>& srcStrides,
               T* dst, const std::vector<std::int64_t>& dstStrides) {
  std::size_t outer = shape.size();
  std::int64_t row = 1;
  while (outer > 0 && srcStrides[outer - 1] == row && dstStrides[outer - 1] == row) row *= shape[--outer];
  if (row == 1 || shapeElements(shape) == 0) {
    walk(shape, srcStrides, dstStrides, [&](std::int64_t, std::int64_t s, std::int64_t d) { dst[d] = src[s]; });
    return;
  }
  Shape rows(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(outer));
  std::vector<std::int64_t> srcRows(srcStrides.begin(), srcStrides.begin() + static_cast<std::ptrdiff_t>(outer));
  std::vector<std::int64_t> dstRows(dstStrides.begin(), dstStrides.begin() + static_cast<std::ptrdiff_t>(outer));
  walk(rows, srcRows, dstRows, [&](std::int64_t, std::int64_t s, std::int64_t d) { std::copy_n(src + s, row, dst + d); });
}

void copyStrided(const Shape& shape, const Tensor& src, const std::vector<std::int64_t>& srcStrides,
                 std::int64_t srcBase, Tensor& dst, const std::vector<std::int64_t>& dstStrides,
                 std::int64_t dstBase) {
  if (src.dtype() == ir::DType::I32)
    copyTyped(shape, src.i32().data() + srcBase, srcStrides, dst.i32().data() + dstBase,
              dstStrides);
  else
    copyTyped(shape, src.f32().data() + srcBase, srcStrides, dst.f32().data() + dstBase,
              dstStrides);
}

Shape reshapeTarget(const KernelArgs& args, const Tensor& x) {
  if (args.rawOut(0).allocated() || args.rawOut(0).isPlaceholder()) return args.rawOut(0).shape();
  Shape shape = args.intsAttr("shape");
  std::int64_t known = 1;
  std::size_t inferred = shape.size();
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (inferred != shape.size()) args.fail("more than one -1 in the target shape");
      inferred = i;
    } else if (shape[i] < 0) {
      args.fail(fmt::format("negative dimension {} in the target shape", shape[i]));
    } else {
      known *= shape[i];
    }
  }
  if (inferred != shape.size()) {
    if (known == 0 || x.elements() % known != 0)
      args.fail(fmt::format("cannot infer -1 reshaping {} to {}", x.typeText(), shapeText(shape)));
    shape[inferred] = x.elements() / known;
  }
  return shape;
}

// y[j, i] = x[i, j] for the tile i in [i0, i1), j in [j0, j1) of x[rows, cols].
template <class T>
void transposeTile(const T* x, T* y, std::int64_t rows, std::int64_t cols, std::int64_t i0,
                   std::int64_t i1, std::int64_t j0, std::int64_t j1) {
  std::int64_t i = i0;
#ifdef __SSE__
  if constexpr (std::is_same_v<T, float>) {
    // 4 x 4 blocks through SSE registers: 8 vector loads and stores per 16
    // elements instead of 16 scalar ones each (4.5x faster on [2, 64, 256]).
    for (; i + 4 <= i1; i += 4) {
      std::int64_t j = j0;
      for (; j + 4 <= j1; j += 4) {
        const float* src = x;
        __m128 r0 = _mm_loadu_ps(src + i * cols + j);
        __m128 r1 = _mm_loadu_ps(src + (i + 1) * cols + j);
        __m128 r2 = _mm_loadu_ps(src + (i + 2) * cols + j);
        __m128 r3 = _mm_loadu_ps(src + (i + 3) * cols + j);
        _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
        float* dst = y;
        _mm_storeu_ps(dst + j * rows + i, r0);
        _mm_storeu_ps(dst + (j + 1) * rows + i, r1);
        _mm_storeu_ps(dst + (j + 2) * rows + i, r2);
        _mm_storeu_ps(dst + (j + 3) * rows + i, r3);
      }
      for (; j < j1; ++j)
        for (std::int64_t k = i; k < i + 4; ++k) y[j * rows + k] = x[k * cols + j];
    }
  }
#endif
  for (std::int64_t j = j0; j < j1; ++j)
    for (std::int64_t k = i; k < i1; ++k) y[j * rows + k] = x[k * cols + j];
}

// y[b, j, i] = x[b, i, j] for `batch` matrices x[rows, cols], in square tiles
// so that both the rows read and the rows written stay in cache (a strided
// walk over y read each element of x from another cache line).
template <class T>
void transposeMatrices(const T* x, T* y, std::int64_t batch, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kTile = 32;
  for (std::int64_t b = 0; b < batch; ++b, x += rows * cols, y += rows * cols)
    for (std::int64_t i0 = 0; i0 < rows; i0 += kTile)
      for (std::int64_t j0 = 0; j0 < cols; j0 += kTile)
        transposeTile(x, y, rows, cols, i0, std::min(i0 + kTile, rows), j0,
                      std::min(j0 + kTile, cols));
}

// True when `perm` swaps the last two axes and keeps the others in place.
bool swapsLastTwo(const std::vector<std::size_t>& perm) {
  std::size_t r = perm.size();
  if (r < 2 || perm[r - 2] != r - 1 || perm[r - 1] != r - 2) return false;
  for (std::size_t i = 0; i + 2 < r; ++i)
    if (perm[i] != i) return false;
  return true;
}

std::vector<std::int64_t> permuted(const std::vector<std::int64_t>& values,
                                   const std::vector<std::size_t>& perm) {
  std::vector<std::int64_t> result;
  for (auto p : perm) result.push_back(values[p]);
  return result;
}

}  // namespace

void reshape(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  Shape shape = reshapeTarget(args, x);
  if (shapeElements(shape) != x.elements())
    args.fail(fmt::format("cannot reshape {} to {}", x.typeText(), shapeText(shape)));
  Tensor& y = args.rawOut(0);
  if ((y.allocated() || y.isPlaceholder()) && y.dtype() != x.dtype())
    args.fail(fmt::format("output 0 is {} but the input is {}", ir::dtypeName(y.dtype()), x.typeText()));
  // The same elements under the new shape: nothing is copied until one of the
  // two is written (Tensor is copy-on-write).
  y = x.reshaped(std::move(shape));
}

void transpose(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  auto permAttr = args.intsAttr("perm");
  if (permAttr.size() != x.rank())
    args.fail(fmt::format("perm has {} entries for {}", permAttr.size(), x.typeText()));
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
  if (swapsLastTwo(perm)) {  // the weight gradients' transposes
    std::int64_t rows = x.dim(-2), cols = x.dim(-1);
    std::int64_t batch = rows * cols == 0 ? 0 : x.elements() / (rows * cols);
    if (x.dtype() == ir::DType::I32)
      transposeMatrices(x.i32().data(), y.i32().data(), batch, rows, cols);
    else
      transposeMatrices(x.f32().data(), y.f32().data(), batch, rows, cols);
    return;
  }
  copyStrided(yShape, x, permuted(rowMajorStrides(x.shape()), perm), 0, y, rowMajorStrides(yShape),
              0);
}

void concat(const KernelArgs& args) {
  if (args.inputCount() == 0 || args.outputCount() != 1)
    args.fail("expects one or more inputs and one output");
  const Tensor& first = args.in(0);
  std::size_t axis = args.axis(args.intAttr("axis"), first.rank());
  Shape yShape = first.shape();
  yShape[axis] = 0;
  for (std::size_t i = 0; i < args.inputCount(); ++i) {
    const Tensor& x = args.in(i);
    if (x.dtype() != first.dtype() || x.rank() != first.rank() ||
        dropAxis(x.shape(), axis) != dropAxis(first.shape(), axis))
      args.fail(fmt::format("input {} {} does not fit input 0 {} along axis {}", i, x.typeText(),
                            first.typeText(), axis));
    yShape[axis] += x.shape()[axis];
  }
  Tensor& y = args.out(0, first.dtype(), yShape);
  auto yStrides = rowMajorStrides(yShape);
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < args.inputCount(); ++i) {
    const Tensor& x = args.in(i);
    copyStrided(x.shape(), x, rowMajorStrides(x.shape()), 0, y, yStrides, offset * yStrides[axis]);
    offset += x.shape()[axis];
  }
}

void split(const KernelArgs& args) {
  if (args.inputCount() != 1 || args.outputCount() == 0)
    args.fail("expects one input and one or more outputs");
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
    args.fail(fmt::format("sizes {} do not split {} along axis {} into {} outputs",
                          shapeText(sizes), x.typeText(), axis, args.outputCount()));
  auto xStrides = rowMajorStrides(x.shape());
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    Shape yShape = x.shape();
    yShape[axis] = sizes[i];
    Tensor& y = args.out(i, x.dtype(), yShape);
    copyStrided(yShape, x, xStrides, offset * xStrides[axis], y, rowMajorStrides(yShape), 0);
    offset += sizes[i];
  }
}

void splitHeads(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  std::int64_t heads = args.intAttr("heads");
  if (x.rank() != 3 || heads <= 0 || x.dim(2) % heads != 0)
    args.fail(fmt::format("cannot split {} into {} heads", x.typeText(), heads));
  std::int64_t b = x.dim(0), s = x.dim(1), d = x.dim(2) / heads;
  // x viewed as [b, s, heads, d], read in the order of y = [b, heads, s, d].
  Shape yShape = {b, heads, s, d};
  Tensor& y = args.out(0, x.dtype(), yShape);
  copyStrided(yShape, x, {s * heads * d, d, heads * d, 1}, 0, y, rowMajorStrides(yShape), 0);
}

void mergeHeads(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  if (x.rank() != 4) args.fail("needs x[b, heads, s, d], got " + x.typeText());
  std::int64_t b = x.dim(0), heads = x.dim(1), s = x.dim(2), d = x.dim(3);
  Tensor& y = args.out(0, x.dtype(), {b, s, heads * d});
  // Walk y viewed as [b, s, heads, d], reading x = [b, heads, s, d].
  Shape view = {b, s, heads, d};
  copyStrided(view, x, {heads * s * d, d, s * d, 1}, 0, y, rowMajorStrides(view), 0);
}

void select(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.in(0);
  if (x.rank() == 0) args.fail("cannot select from a scalar");
  std::size_t axis = args.axis(args.intAttr("axis", -1), x.rank());
  std::int64_t index = args.intAttr("index");
  if (index < 0 || index >= x.shape()[axis])
    args.fail(fmt::format("index {} is outside axis {} of {}", index, axis, x.typeText()));
  Shape yShape = dropAxis(x.shape(), axis);
  Tensor& y = args.out(0, x.dtype(), yShape);
  auto xStrides = rowMajorStrides(x.shape());
  copyStrided(yShape, x, dropAxis(xStrides, axis), index * xStrides[axis], y,
              rowMajorStrides(yShape), 0);
}

void selectGrad(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& dy = args.f32(0);
  const Tensor& like = args.in(1);
  if (like.rank() == 0) args.fail("like must have rank 1 or more");
  std::size_t axis = args.axis(args.intAttr("axis", -1), like.rank());
  std::int64_t index = args.intAttr("index");
  if (index < 0 || index >= like.shape()[axis])
    args.fail(fmt::format("index {} is outside axis {} of {}", index, axis, like.typeText()));
  if (dy.shape() != dropAxis(like.shape(), axis))
    args.fail(fmt::format("dy {} does not match like {} without axis {}", dy.typeText(),
                          like.typeText(), axis));
  Tensor& dx = args.outF32(0, like.shape());
  std::fill(dx.f32().begin(), dx.f32().end(), 0.0f);
  auto dxStrides = rowMajorStrides(like.shape());
  copyStrided(dy.shape(), dy, rowMajorStrides(dy.shape()), 0, dx, dropAxis(dxStrides, axis),
              index * dxStrides[axis]);
}

}  // namespace meshflow::runtime::cpu
