// Type rules of the elementwise ops: the output has the type of the input (or
// of the broadcast inputs).
#include <fmt/format.h>

#include "ir/OpRulesImpl.h"

namespace meshflow::ir::rules {

Types constantRule(const Rule& r) {
  r.expectInputs(0);
  r.allowAttrs({"value"});
  r.numberAttr("value");
  return {TensorType{DType::F32, {}}};
}

Types binaryRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({});
  const TensorType& a = r.in(0);
  const TensorType& b = r.in(1);
  r.expectFloat(0);
  r.expectFloat(1);
  if (a.dtype != b.dtype) r.fail(fmt::format("dtypes differ: {} and {}", a.text(), b.text()));
  auto shape = broadcastShapes(a.shape, b.shape);
  if (!shape) r.fail(fmt::format("shapes do not broadcast: {} and {}", a.text(), b.text()));
  return {TensorType{a.dtype, *shape}};
}

Types unaryRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({});
  r.expectFloat(0);
  return {r.in(0)};
}

Types scaleRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"factor"});
  r.expectFloat(0);
  r.numberAttr("factor");
  return {r.in(0)};
}

Types rsqrtRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"eps"});
  r.expectFloat(0);
  if (!(r.numberAttr("eps") >= 0)) r.fail("attribute 'eps' must be >= 0");
  return {r.in(0)};
}

Types castRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"dtype"});
  r.expectFloat(0);
  std::string name = r.stringAttr("dtype");
  std::optional<DType> dtype = parseDType(name);
  if (!dtype || !isFloat(*dtype)) r.fail("attribute 'dtype' must be f32, f16 or bf16, got '" + name + "'");
  return {TensorType{*dtype, r.in(0).shape}};
}

namespace {

void checkDropoutAttrs(const Rule& r) {
  double p = r.numberAttr("p");
  if (p < 0 || p >= 1) r.fail(fmt::format("attribute 'p' must be in [0, 1), got {}", p));
  r.intAttr("seed");
}

}  // namespace

Types dropoutRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"p", "seed"});
  r.expectFloat(0);
  checkDropoutAttrs(r);
  return {r.in(0)};
}

Types dropoutGradRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"p", "seed", "forward_op"});
  r.expectFloat(0);
  checkDropoutAttrs(r);
  if (r.intAttr("forward_op") < 0) r.fail("attribute 'forward_op' must be >= 0");
  return {r.in(0)};
}

Types causalMaskRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({});
  r.expectFloat(0);
  r.expectRankAtLeast(0, 2);
  const auto& shape = r.in(0).shape;
  if (shape[shape.size() - 1] != shape[shape.size() - 2])
    r.fail("expects square trailing dimensions [..., s, s], got " + r.in(0).text());
  return {r.in(0)};
}

Types unaryGradRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({});
  r.expectFloat(0);
  r.expectSameType(0, 1);
  return {r.in(1)};
}

}  // namespace meshflow::ir::rules
