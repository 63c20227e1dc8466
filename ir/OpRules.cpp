#include "ir/OpRules.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "ir/OpRulesImpl.h"

namespace meshflow::ir {
namespace rules {
namespace {

std::string attrText(const Attribute& attr) {
  struct Printer {
    std::string operator()(std::int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return fmt::format("{}", v); }
    std::string operator()(const std::string& v) const { return fmt::format("\"{}\"", v); }
    std::string operator()(const std::vector<std::int64_t>& v) const { return intsText(v); }
  };
  return std::visit(Printer{}, attr);
}

}  // namespace

void Rule::fail(const std::string& message) const {
  throw ShapeError(fmt::format("{}: {}", name(), message));
}

void Rule::expectInputs(std::size_t count) const {
  if (inputs_.size() != count)
    fail(fmt::format("expects {} input{}, got {}", count, count == 1 ? "" : "s", inputs_.size()));
}

void Rule::expectAtLeastInputs(std::size_t count) const {
  if (inputs_.size() < count)
    fail(fmt::format("expects at least {} input{}, got {}", count, count == 1 ? "" : "s",
                     inputs_.size()));
}

void Rule::expectFloat(std::size_t i) const {
  if (isFloat(in(i).dtype)) return;
  if (inputs_.size() == 1) fail("expects a floating-point tensor, got " + in(i).text());
  fail(fmt::format("input {} must be floating-point, got {}", i, in(i).text()));
}

void Rule::expectI32(std::size_t i, const char* role) const {
  if (in(i).dtype != DType::I32) fail(fmt::format("{} must be i32, got {}", role, in(i).text()));
}

void Rule::expectRankAtLeast(std::size_t i, std::size_t rank) const {
  if (in(i).rank() < rank)
    fail(fmt::format("expects a tensor of rank >= {}, got {}", rank, in(i).text()));
}

void Rule::expectScalar(std::size_t i, const char* role) const {
  if (in(i).rank() != 0) fail(fmt::format("{} must be a scalar, got {}", role, in(i).text()));
}

void Rule::expectSameType(std::size_t i, std::size_t j) const {
  if (in(i).dtype != in(j).dtype)
    fail(fmt::format("dtypes differ: {} and {}", in(i).text(), in(j).text()));
  expectSameShape(i, j);
}

void Rule::expectSameShape(std::size_t i, std::size_t j) const {
  if (in(i).shape != in(j).shape)
    fail(fmt::format("shapes differ: {} and {}", in(i).text(), in(j).text()));
}

void Rule::allowAttrs(std::initializer_list<const char*> known) const {
  for (const auto& attr : attrs_) {
    const std::string& name = attr.first;  // clang 14 cannot capture structured bindings
    bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return name == k; });
    if (!ok) fail(fmt::format("unknown attribute '{}'", name));
  }
}

const Attribute* Rule::find(const char* name) const {
  auto it = attrs_.find(name);
  return it == attrs_.end() ? nullptr : &it->second;
}

void Rule::badType(const char* name, const char* expected) const {
  fail(fmt::format("attribute '{}' must be {}, got {}", name, expected, attrText(*find(name))));
}

std::optional<std::int64_t> Rule::optIntAttr(const char* name) const {
  const Attribute* attr = find(name);
  if (!attr) return std::nullopt;
  if (const auto* v = std::get_if<std::int64_t>(attr)) return *v;
  badType(name, "an int");
}

std::int64_t Rule::intAttr(const char* name) const {
  auto value = optIntAttr(name);
  if (!value) fail(fmt::format("missing attribute '{}'", name));
  return *value;
}

std::optional<double> Rule::optNumberAttr(const char* name) const {
  const Attribute* attr = find(name);
  if (!attr) return std::nullopt;
  if (const auto* v = std::get_if<double>(attr)) return *v;
  if (const auto* v = std::get_if<std::int64_t>(attr)) return static_cast<double>(*v);
  badType(name, "a number");
}

double Rule::numberAttr(const char* name) const {
  auto value = optNumberAttr(name);
  if (!value) fail(fmt::format("missing attribute '{}'", name));
  return *value;
}

std::string Rule::stringAttr(const char* name) const {
  const Attribute* attr = find(name);
  if (!attr) fail(fmt::format("missing attribute '{}'", name));
  if (const auto* v = std::get_if<std::string>(attr)) return *v;
  badType(name, "a string");
}

std::vector<std::int64_t> Rule::intsAttr(const char* name) const {
  const Attribute* attr = find(name);
  if (!attr) fail(fmt::format("missing attribute '{}'", name));
  if (const auto* v = std::get_if<std::vector<std::int64_t>>(attr)) return *v;
  badType(name, "an int list");
}

std::int64_t Rule::intAttrIn(const char* name, std::int64_t lo, std::int64_t hi) const {
  std::int64_t value = intAttr(name);
  if (value < lo || value > hi)
    fail(fmt::format("attribute '{}' must be in [{}, {}], got {}", name, lo, hi, value));
  return value;
}

bool Rule::flagAttr(const char* name) const {
  std::int64_t value = optIntAttr(name).value_or(0);
  if (value != 0 && value != 1)
    fail(fmt::format("attribute '{}' must be 0 or 1, got {}", name, value));
  return value == 1;
}

std::size_t Rule::axisAttr(const char* name, const TensorType& type) const {
  std::int64_t axis = intAttr(name);
  if (axis < 0 || axis >= static_cast<std::int64_t>(type.rank()))
    fail(fmt::format("{} {} is out of range for {}", name, axis, type.text()));
  return static_cast<std::size_t>(axis);
}

bool isFloat(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

std::string intsText(const std::vector<std::int64_t>& values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

std::vector<Dim> removeAxes(const std::vector<Dim>& shape, const std::vector<std::int64_t>& axes) {
  std::vector<Dim> out;
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (std::find(axes.begin(), axes.end(), static_cast<std::int64_t>(i)) == axes.end())
      out.push_back(shape[i]);
  return out;
}

void checkAxes(const Rule& rule, const std::vector<std::int64_t>& axes, const TensorType& type) {
  std::set<std::int64_t> seen;
  for (std::int64_t axis : axes) {
    if (axis < 0 || axis >= static_cast<std::int64_t>(type.rank()))
      rule.fail(fmt::format("axes {} out of range for {}", intsText(axes), type.text()));
    if (!seen.insert(axis).second)
      rule.fail(fmt::format("axes {} repeat axis {}", intsText(axes), axis));
  }
}

namespace {

void checkDims(const Rule& r, const TensorType& type) {
  for (const Dim& d : type.shape)
    if (d.value < 1) r.fail("dimensions must be positive, got " + type.text());
}

void checkInput(const Rule& r, const TensorType& type) {
  r.allowAttrs({"name"});
  r.stringAttr("name");
  checkDims(r, type);
}

void checkParameter(const Rule& r, const TensorType& type) {
  // `init_name`: a master weight draws the values of its half parameter;
  // `value`: the constant of init "full" (the loss scale).
  r.allowAttrs({"name", "init", "std", "init_name", "value"});
  r.stringAttr("name");
  if (!isFloat(type.dtype)) r.fail("expects a floating-point type, got " + type.text());
  if (!type.concrete()) r.fail("a parameter cannot depend on the batch size: " + type.text());
  checkDims(r, type);
  // `std` is required by "normal" and ignored by the others, so a tracer may
  // always record it.
  std::string init = r.stringAttr("init");
  if (init == "normal") r.numberAttr("std");
  if (init == "full") r.numberAttr("value");
  if (init != "normal" && init != "zeros" && init != "ones" && init != "full")
    r.fail(fmt::format("attribute 'init' must be \"normal\", \"zeros\", \"ones\" or \"full\", got \"{}\"",
                       init));
  if (r.optNumberAttr("std").value_or(0) < 0) r.fail("attribute 'std' must be >= 0");
}

}  // namespace
}  // namespace rules

using namespace rules;

bool isDeclaredLeaf(OpKind kind) { return kind == OpKind::Input || kind == OpKind::Parameter; }

void checkLeafType(OpKind kind, const TensorType& type, const Attributes& attrs) {
  Types none;
  Rule rule(kind, none, attrs);
  if (kind == OpKind::Input) return checkInput(rule, type);
  if (kind == OpKind::Parameter) return checkParameter(rule, type);
  throw std::invalid_argument(
      fmt::format("checkLeafType: {} is not a declared leaf", opName(kind)));
}

std::optional<std::vector<Dim>> broadcastShapes(const std::vector<Dim>& a,
                                                const std::vector<Dim>& b) {
  std::size_t rank = std::max(a.size(), b.size());
  std::vector<Dim> out(rank);
  for (std::size_t i = 0; i < rank; ++i) {
    // Walk from the trailing dimension; a missing dim acts as 1.
    Dim x = i < a.size() ? a[a.size() - 1 - i] : Dim::constant(1);
    Dim y = i < b.size() ? b[b.size() - 1 - i] : Dim::constant(1);
    if (x == y || y == Dim::constant(1)) {
      out[rank - 1 - i] = x;
    } else if (x == Dim::constant(1)) {
      out[rank - 1 - i] = y;
    } else {
      return std::nullopt;
    }
  }
  return out;
}

namespace {

using RuleFn = Types (*)(const Rule&);

RuleFn ruleFor(OpKind kind) {
  switch (kind) {
    case OpKind::Input:
    case OpKind::Parameter:
      return nullptr;
    case OpKind::Constant:
      return constantRule;
    case OpKind::MatMul:
      return matmulRule;
    case OpKind::Add:
    case OpKind::Sub:
    case OpKind::Mul:
    case OpKind::Div:
      return binaryRule;
    case OpKind::Neg:
    case OpKind::Relu:
    case OpKind::Gelu:
    case OpKind::Tanh:
    case OpKind::Sigmoid:
    case OpKind::Exp:
      return unaryRule;
    case OpKind::Rsqrt:
      return rsqrtRule;
    case OpKind::Scale:
      return scaleRule;
    case OpKind::Cast:
      return castRule;
    case OpKind::Softmax:
      return softmaxRule;
    case OpKind::LayerNorm:
      return layerNormRule;
    case OpKind::Embedding:
      return embeddingRule;
    case OpKind::CrossEntropy:
      return crossEntropyRule;
    case OpKind::Reshape:
      return reshapeRule;
    case OpKind::Transpose:
      return transposeRule;
    case OpKind::Concat:
      return concatRule;
    case OpKind::Split:
      return splitRule;
    case OpKind::Sum:
    case OpKind::Mean:
      return reduceRule;
    case OpKind::Dropout:
      return dropoutRule;
    case OpKind::SplitHeads:
      return splitHeadsRule;
    case OpKind::MergeHeads:
      return mergeHeadsRule;
    case OpKind::CausalMask:
    case OpKind::CausalMaskGrad:
      return causalMaskRule;
    case OpKind::TopKGate:
      return topKGateRule;
    case OpKind::Select:
      return selectRule;
    case OpKind::MoeDispatch:
      return moeDispatchRule;
    case OpKind::MoeCombine:
      return moeCombineRule;
    case OpKind::MoeDropped:
      return moeDroppedRule;
    case OpKind::ReduceToShape:
      return reduceToShapeRule;
    case OpKind::ReluGrad:
    case OpKind::GeluGrad:
    case OpKind::TanhGrad:
    case OpKind::SigmoidGrad:
      return unaryGradRule;
    case OpKind::SoftmaxGrad:
      return softmaxGradRule;
    case OpKind::LayerNormGrad:
      return layerNormGradRule;
    case OpKind::EmbeddingGrad:
      return embeddingGradRule;
    case OpKind::CrossEntropyGrad:
      return crossEntropyGradRule;
    case OpKind::DropoutGrad:
      return dropoutGradRule;
    case OpKind::TopKGateGrad:
      return topKGateGradRule;
    case OpKind::SelectGrad:
      return selectGradRule;
    case OpKind::MoeDispatchGrad:
      return moeDispatchGradRule;
    case OpKind::MoeCombineGrad:
      return moeCombineGradRule;
    case OpKind::BroadcastTo:
      return broadcastToRule;
    case OpKind::GlobalNorm:
      return globalNormRule;
    case OpKind::ClipScale:
      return clipScaleRule;
    case OpKind::SgdUpdate:
      return sgdUpdateRule;
    case OpKind::AdamUpdate:
      return adamUpdateRule;
    case OpKind::LossScaleUpdate:
      return lossScaleUpdateRule;
  }
  return nullptr;
}

}  // namespace

std::vector<TensorType> inferTypes(OpKind kind, const std::vector<TensorType>& inputs,
                                   const Attributes& attrs) {
  RuleFn fn = ruleFor(kind);
  if (!fn)
    throw std::invalid_argument(
        fmt::format("inferTypes: the type of {} is declared, not inferred", opName(kind)));
  auto wide = attrs.find(kF32Outputs);
  if (wide == attrs.end()) return fn(Rule(kind, inputs, attrs));
  // Outputs kept in f32 whatever the operands' precision (a half parameter's
  // weight gradient, accumulated over microbatches in f32).
  Attributes rest = attrs;
  rest.erase(kF32Outputs);
  std::vector<TensorType> out = fn(Rule(kind, inputs, rest));
  const auto* indices = std::get_if<std::vector<std::int64_t>>(&wide->second);
  if (!indices) throw ShapeError(fmt::format("{}: attribute '{}' must be a list", opName(kind), kF32Outputs));
  for (std::int64_t i : *indices) {
    if (i < 0 || static_cast<std::size_t>(i) >= out.size() || !isFloat(out[static_cast<std::size_t>(i)].dtype))
      throw ShapeError(
          fmt::format("{}: attribute '{}' names output {}, which is not a float output", opName(kind), kF32Outputs, i));
    out[static_cast<std::size_t>(i)].dtype = DType::F32;
  }
  return out;
}

}  // namespace meshflow::ir
