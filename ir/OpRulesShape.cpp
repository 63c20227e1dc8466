// Type rules of the ops that move elements without arithmetic on them (reshape,
// transpose, concat, split, heads, select), the reductions, and the gradients
// that undo broadcasting and reductions. Layout ops accept any dtype.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "ir/OpRulesImpl.h"

namespace meshflow::ir::rules {
namespace {

/// The element count of `type` as coefficient · batch^power.
struct Count {
  std::int64_t coefficient = 1;
  int batchPower = 0;
};

Count countOf(const TensorType& type) {
  Count c;
  for (const Dim& d : type.shape) {
    c.coefficient *= d.value;
    c.batchPower += d.perBatch ? 1 : 0;
  }
  return c;
}

/// The product of two dims; at most one of them may depend on the batch.
std::optional<Dim> product(const Dim& a, const Dim& b) {
  if (a.perBatch && b.perBatch) return std::nullopt;
  return Dim{a.value * b.value, a.perBatch || b.perBatch};
}

/// The sum of two dims along a concatenation axis: both constant or both per-batch.
std::optional<Dim> sum(const Dim& a, const Dim& b) {
  if (a.perBatch != b.perBatch) return std::nullopt;
  return Dim{a.value + b.value, a.perBatch};
}

/// The index of the single -1 in a reshape target (or -1 if none), after
/// checking every other entry is a positive dim.
std::int64_t inferredIndex(const Rule& r, const std::vector<std::int64_t>& target) {
  std::int64_t index = -1;
  for (std::size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1 && index >= 0) r.fail("more than one -1 in target " + intsText(target));
    if (target[i] == -1) {
      index = static_cast<std::int64_t>(i);
    } else if (target[i] < 1) {
      r.fail(fmt::format("invalid target dimension {} in {}", target[i], intsText(target)));
    }
  }
  return index;
}

}  // namespace

Types reshapeRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"shape"});
  const TensorType& x = r.in(0);
  std::vector<std::int64_t> target = r.intsAttr("shape");
  std::int64_t inferred = inferredIndex(r, target);
  std::int64_t known = 1;
  for (std::int64_t v : target) known *= v == -1 ? 1 : v;
  Count count = countOf(x);
  std::string what = fmt::format("cannot reshape {} to {}", x.text(), intsText(target));
  if (count.batchPower > 1) r.fail(what + ": the batch appears in more than one dimension");
  if (inferred < 0 && count.batchPower == 1) r.fail(what + ": infer the batch dimension with -1");
  if (inferred < 0 ? count.coefficient != known : count.coefficient % known != 0)
    r.fail(what + ": element counts differ");
  TensorType y{x.dtype, {}};
  for (std::int64_t v : target)
    y.shape.push_back(v == -1 ? Dim{count.coefficient / known, count.batchPower == 1}
                              : Dim::constant(v));
  return {y};
}

Types transposeRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"perm"});
  const TensorType& x = r.in(0);
  std::vector<std::int64_t> perm = r.intsAttr("perm");
  std::vector<std::int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::int64_t> identity(x.rank());
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity)
    r.fail(fmt::format("perm {} is not a permutation of the dimensions of {}", intsText(perm),
                       x.text()));
  TensorType y{x.dtype, {}};
  for (std::int64_t axis : perm) y.shape.push_back(x.shape[axis]);
  return {y};
}

Types concatRule(const Rule& r) {
  r.expectAtLeastInputs(1);
  r.allowAttrs({"axis"});
  std::size_t axis = r.axisAttr("axis", r.in(0));
  TensorType y = r.in(0);
  for (std::size_t i = 1; i < r.inputs().size(); ++i) {
    const TensorType& x = r.in(i);
    auto cannot = [&] {
      r.fail(fmt::format("cannot concatenate {} and {} along axis {}", r.in(0).text(), x.text(),
                         axis));
    };
    if (x.dtype != y.dtype || x.rank() != y.rank()) cannot();
    for (std::size_t d = 0; d < x.rank(); ++d)
      if (d != axis && x.shape[d] != y.shape[d]) cannot();
    auto total = sum(y.shape[axis], x.shape[axis]);
    if (!total) cannot();
    y.shape[axis] = *total;
  }
  return {y};
}

Types splitRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"axis", "sizes"});
  const TensorType& x = r.in(0);
  std::size_t axis = r.axisAttr("axis", x);
  std::vector<std::int64_t> sizes = r.intsAttr("sizes");
  if (x.shape[axis].perBatch)
    r.fail(fmt::format("cannot split the batch dimension {} of {}", axis, x.text()));
  std::int64_t total = 0;
  for (std::int64_t size : sizes) {
    if (size < 1) r.fail("sizes must be positive, got " + intsText(sizes));
    total += size;
  }
  if (sizes.empty() || total != x.shape[axis].value)
    r.fail(fmt::format("sizes {} do not add up to dimension {} of {}", intsText(sizes), axis,
                       x.text()));
  Types outputs;
  for (std::int64_t size : sizes) {
    TensorType y = x;
    y.shape[axis] = Dim::constant(size);
    outputs.push_back(y);
  }
  return outputs;
}

Types reduceRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"axes"});
  r.expectFloat(0);
  std::vector<std::int64_t> axes = r.intsAttr("axes");
  if (axes.empty()) r.fail("attribute 'axes' must not be empty");
  checkAxes(r, axes, r.in(0));
  return {TensorType{r.in(0).dtype, removeAxes(r.in(0).shape, axes)}};
}

Types splitHeadsRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"heads"});
  const TensorType& x = r.in(0);
  std::int64_t heads = r.intAttr("heads");
  if (heads < 1) r.fail(fmt::format("attribute 'heads' must be >= 1, got {}", heads));
  if (x.rank() != 3) r.fail("expects a tensor [b, s, heads*d], got " + x.text());
  const Dim& width = x.shape[2];
  if (width.perBatch || width.value % heads != 0)
    r.fail(fmt::format("{} heads do not divide the last dimension of {}", heads, x.text()));
  return {TensorType{
      x.dtype, {x.shape[0], Dim::constant(heads), x.shape[1], Dim::constant(width.value / heads)}}};
}

Types mergeHeadsRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({});
  const TensorType& x = r.in(0);
  if (x.rank() != 4) r.fail("expects a tensor [b, heads, s, d], got " + x.text());
  auto width = product(x.shape[1], x.shape[3]);
  if (!width) r.fail("heads and head size both depend on the batch: " + x.text());
  return {TensorType{x.dtype, {x.shape[0], x.shape[2], *width}}};
}

namespace {

/// The axis and index of a select (axis optional: the last) or select_grad on `x`.
std::size_t selectAxis(const Rule& r, const TensorType& x, bool axisOptional) {
  std::size_t axis = axisOptional && !r.optIntAttr("axis") ? x.rank() - 1 : r.axisAttr("axis", x);
  const Dim& dim = x.shape[axis];
  if (dim.perBatch) r.fail(fmt::format("cannot select along the batch dimension of {}", x.text()));
  r.intAttrIn("index", 0, dim.value - 1);
  return axis;
}

}  // namespace

Types selectRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"axis", "index"});
  r.expectRankAtLeast(0, 1);
  std::size_t axis = selectAxis(r, r.in(0), true);
  return {TensorType{r.in(0).dtype, removeAxes(r.in(0).shape, {std::int64_t(axis)})}};
}

Types selectGradRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({"axis", "index"});
  r.expectFloat(0);
  const TensorType& dy = r.in(0);
  const TensorType& like = r.in(1);
  std::size_t axis = selectAxis(r, like, false);
  if (dy.shape != removeAxes(like.shape, {std::int64_t(axis)}))
    r.fail(fmt::format("dy {} does not match {} without axis {}", dy.text(), like.text(), axis));
  return {TensorType{dy.dtype, like.shape}};
}

Types reduceToShapeRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({});
  r.expectFloat(0);
  const TensorType& dy = r.in(0);
  const TensorType& like = r.in(1);
  auto shape = broadcastShapes(like.shape, dy.shape);
  if (!shape || *shape != dy.shape)
    r.fail(fmt::format("{} does not broadcast to {}", like.text(), dy.text()));
  return {TensorType{dy.dtype, like.shape}};
}

Types broadcastToRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({"axes"});
  r.expectFloat(0);
  const TensorType& x = r.in(0);
  const TensorType& like = r.in(1);
  std::vector<std::int64_t> axes = r.intsAttr("axes");
  checkAxes(r, axes, like);
  if (x.shape != removeAxes(like.shape, axes))
    r.fail(
        fmt::format("{} does not match {} without axes {}", x.text(), like.text(), intsText(axes)));
  return {TensorType{x.dtype, like.shape}};
}

}  // namespace meshflow::ir::rules
