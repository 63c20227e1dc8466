// Type rules of the optimizer-update ops. A parameter, its gradient and its
// optimizer state have the same shape; their dtypes may differ (an f32 master
// state for a bf16 weight), and each output has the type of what it replaces.
#include <fmt/format.h>

#include "ir/OpRulesImpl.h"

namespace meshflow::ir::rules {
namespace {

double numberAtLeast(const Rule& r, const char* name, double lo) {
  double value = r.numberAttr(name);
  if (value < lo) r.fail(fmt::format("attribute '{}' must be >= {}, got {}", name, lo, value));
  return value;
}

double fraction(const Rule& r, const char* name) {
  double value = r.numberAttr(name);
  if (value < 0 || value >= 1)
    r.fail(fmt::format("attribute '{}' must be in [0, 1), got {}", name, value));
  return value;
}

/// Inputs w, g, scale, states...: floating, g and the states shaped like w,
/// scale a scalar.
void checkUpdateInputs(const Rule& r, std::size_t states) {
  r.expectInputs(3 + states);
  for (std::size_t i = 0; i < r.inputs().size(); ++i) r.expectFloat(i);
  r.expectScalar(2, "scale");
  for (std::size_t i : {std::size_t{1}, std::size_t{3}, std::size_t{4}})
    if (i < r.inputs().size()) r.expectSameShape(0, i);
}

}  // namespace

Types globalNormRule(const Rule& r) {
  r.expectAtLeastInputs(1);
  r.allowAttrs({});
  for (std::size_t i = 0; i < r.inputs().size(); ++i) r.expectFloat(i);
  return {TensorType{DType::F32, {}}};
}

Types clipScaleRule(const Rule& r) {
  // With a loss scale (input 1) the op also unscales, and clip_norm 0 means
  // no clipping.
  bool scaled = r.inputs().size() == 2;
  if (!scaled) r.expectInputs(1);
  r.allowAttrs({"clip_norm"});
  r.expectFloat(0);
  r.expectScalar(0, "norm");
  if (scaled) r.expectScalar(1, "loss_scale");
  double clip = r.numberAttr("clip_norm");
  if (clip < 0 || (clip == 0 && !scaled))
    r.fail(fmt::format("attribute 'clip_norm' must be > 0, got {}", clip));
  return {TensorType{DType::F32, {}}};
}

Types lossScaleUpdateRule(const Rule& r) {
  r.expectInputs(3);
  r.allowAttrs({"window"});
  r.expectScalar(0, "loss_scale");
  r.expectScalar(2, "factor");
  if (r.in(1).dtype != DType::F32 || r.in(1).shape != std::vector<Dim>{Dim::constant(2)})
    r.fail("counts must be f32[2], got " + r.in(1).text());
  if (r.intAttr("window") < 1) r.fail("attribute 'window' must be >= 1");
  return {r.in(0), r.in(1)};
}

Types sgdUpdateRule(const Rule& r) {
  checkUpdateInputs(r, 1);
  r.allowAttrs({"lr", "momentum", "weight_decay"});
  numberAtLeast(r, "lr", 0);
  fraction(r, "momentum");
  numberAtLeast(r, "weight_decay", 0);
  return {r.in(0), r.in(3)};
}

Types adamUpdateRule(const Rule& r) {
  checkUpdateInputs(r, 2);
  r.allowAttrs({"lr", "beta1", "beta2", "eps", "weight_decay", "decoupled", "step"});
  numberAtLeast(r, "lr", 0);
  fraction(r, "beta1");
  fraction(r, "beta2");
  if (r.numberAttr("eps") <= 0) r.fail("attribute 'eps' must be > 0");
  numberAtLeast(r, "weight_decay", 0);
  r.intAttrIn("decoupled", 0, 1);
  if (r.intAttr("step") < 0) r.fail("attribute 'step' must be >= 0");
  return {r.in(0), r.in(3), r.in(4)};
}

}  // namespace meshflow::ir::rules
