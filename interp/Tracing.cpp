#include "interp/Tracing.h"

#include <fmt/format.h>

#include <algorithm>

#include "interp/CallNotes.h"
#include "interp/Evaluator.h"
#include "ir/OpRules.h"

namespace meshflow::interp {
namespace {

ir::Location locationOf(const SourceSpan& span) {
  if (!span.valid()) return {};
  return {span.file->name(), span.line + 1, span.column + 1};
}

// Tensors are bounded so that element counts (times any batch up to 2^20) stay
// far inside 64-bit arithmetic; no real model comes near.
constexpr double kMaxElementsPerSample = 1e12;

void checkSize(const ir::TensorType& type) {
  double elements = 1;
  for (const auto& d : type.shape) elements *= static_cast<double>(d.value);
  if (elements > kMaxElementsPerSample)
    throw ScriptError(DiagnosticKind::ShapeMismatch,
                      fmt::format("tensor {} has more than 10^12 elements per sample", type.text()));
}

}  // namespace

// ---- Tracer ----

std::vector<ir::ValueId> Tracer::record(ir::OpKind kind, const std::vector<ir::ValueId>& inputs,
                                        ir::Attributes attrs, const SourceSpan& where,
                                        const std::string& name) {
  std::vector<ir::TensorType> types;
  for (ir::ValueId id : inputs) types.push_back(graph.value(id).type);
  std::vector<ir::TensorType> outputs;
  try {
    outputs = ir::inferTypes(kind, types, attrs);
  } catch (const ir::ShapeError& error) {
    throw ScriptError(DiagnosticKind::ShapeMismatch, error.what());
  }
  for (const auto& type : outputs) checkSize(type);
  ir::Op op;
  op.kind = kind;
  op.inputs = inputs;
  op.attrs = std::move(attrs);
  op.scope = scope();
  op.location = locationOf(where);
  ir::OpId id = graph.addOp(std::move(op), outputs);
  const auto& made = graph.op(id).outputs;
  if (!name.empty() && made.size() == 1) graph.value(made[0]).name = qualified(name);
  return made;
}

ir::ValueId Tracer::leaf(ir::OpKind kind, const std::string& name, ir::Attributes attrs,
                         ir::TensorType type, const SourceSpan& where) {
  checkSize(type);
  ir::Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  op.attrs["name"] = name;
  op.scope = scope();
  op.location = locationOf(where);
  ir::OpId id = graph.addOp(std::move(op), {std::move(type)});
  ir::ValueId value = graph.op(id).outputs[0];
  graph.value(value).name = name;
  return value;
}

ir::ValueId Tracer::input(const std::string& name, ir::TensorType type, const SourceSpan& where) {
  return leaf(ir::OpKind::Input, name, {}, std::move(type), where);
}

ir::ValueId Tracer::parameter(const std::string& name, ir::TensorType type, const std::string& init,
                              double stddev, const SourceSpan& where) {
  ir::Attributes attrs = {{"init", init}};
  if (init == "normal") attrs["std"] = stddev;
  return leaf(ir::OpKind::Parameter, qualified(name), std::move(attrs), std::move(type), where);
}

std::string Tracer::scope() const {
  std::string path;
  for (const auto& frame : frames_)
    if (!frame.name.empty()) path += (path.empty() ? "" : ".") + frame.name;
  return path;
}

std::string Tracer::UniqueNames::take(const std::string& base) {
  if (used_.insert(base).second) return base;
  // Names are only ever added, so every base_k below the count is taken.
  int& n = counted_[base];
  std::string unique;
  do unique = fmt::format("{}_{}", base, ++n);
  while (!used_.insert(unique).second);
  return unique;
}

void Tracer::enter(const std::string& name) {
  // Repeated calls of one layer in one scope are numbered: mlp, mlp_1, mlp_2 …
  std::string unique = frames_.back().childNames.take(name);
  frames_.push_back(Frame{std::move(unique), {}});
}

void Tracer::leave() {
  if (frames_.size() > 1) frames_.pop_back();
}

std::string Tracer::qualified(const std::string& name) {
  const std::string path = scope();
  return valueNames_.take(path.empty() ? name : path + "." + name);
}

// ---- values ----

std::string TensorObject::repr(int) const {
  const auto& info = tracer_->graph.value(id_);
  return fmt::format("tensor {}{}", info.type.text(), info.name.empty() ? "" : " " + info.name);
}

std::optional<Value> TensorObject::field(const std::string& name) const {
  const auto& type = this->type();
  if (name == "dtype") return Value::object(ValueKind::Object, std::make_shared<DTypeObject>(type.dtype));
  if (name == "name") return Value::string(tracer_->graph.value(id_).name);
  if (name == "shape") {
    std::vector<Value> dims;
    for (const auto& d : type.shape) dims.push_back(dimValue(d));
    return Value::list(std::move(dims));
  }
  return std::nullopt;
}

std::optional<ir::Dim> dimOf(const Value& value) {
  if (value.isInt()) return ir::Dim::constant(value.asInt());
  if (value.kind() == ValueKind::Object)
    if (auto* dim = dynamic_cast<DimObject*>(value.object().get())) return dim->dim;
  return std::nullopt;
}

Value dimValue(const ir::Dim& dim) {
  if (!dim.perBatch) return Value::integer(dim.value);
  return Value::object(ValueKind::Object, std::make_shared<DimObject>(dim));
}

TensorObject* asTensor(const Value& value) {
  if (value.kind() != ValueKind::Object) return nullptr;
  return dynamic_cast<TensorObject*>(value.object().get());
}

// ---- tracing a model ----

TracedModel traceModel(Evaluator& evaluator, const ModelObject& model, const SourceSpan& where) {
  auto& state = evaluator.state();
  const auto& declaration = model.declaration();
  if (state.tracer)
    failAt(DiagnosticKind::InvalidModel, "a model cannot be traced inside another model", where);
  auto tracer = std::make_shared<Tracer>();
  state.tracer = tracer;
  struct Restore {
    InterpreterState& state;
    ~Restore() { state.tracer.reset(); }
  } restore{state};

  auto env = std::make_shared<Environment>(declaration->closure());
  for (const auto& [name, value] : model.args())
    env->define(name, Binding{value, false, {}});
  env->define("batch", Binding{dimValue(ir::Dim::batch()), false, {}});
  Value loss;
  try {
    loss = evaluator.runBody(declaration->decl(), env);
  } catch (ScriptError& error) {
    // The body runs when the model is traced (by plan, train, trace): the
    // chain of calls goes on to that call, in the user's script.
    noteCall(error, fmt::format("in model '{}' traced here", declaration->name()), where);
    throw;
  }

  TensorObject* tensor = asTensor(loss);
  bool scalarLoss = tensor && tensor->type().rank() == 0 && tensor->type().dtype == ir::DType::F32;
  if (!scalarLoss)
    failAt(DiagnosticKind::InvalidModel,
           fmt::format("model '{}' must return its loss, an f32 scalar tensor; it returned {}",
                       declaration->name(), tensor ? tensor->type().text() : loss.aTypeName()),
           declaration->decl().nameSpan);
  tracer->graph.outputs = {tensor->id()};
  return {tracer, declaration->name()};
}

}  // namespace meshflow::interp

namespace meshflow::interp {

std::string GraphObject::repr(int) const {
  const auto& g = graph();
  std::int64_t parameters = 0;
  for (ir::ValueId p : g.parameters()) parameters += g.value(p).type.elements(1);
  return fmt::format("graph {}: {} ops, {} parameter tensors, {} parameters", traced_.name,
                     g.ops().size(), g.parameters().size(), parameters);
}

std::optional<Value> GraphObject::field(const std::string& name) const {
  const auto& g = graph();
  if (name == "name") return Value::string(traced_.name);
  if (name == "ops") return Value::integer(static_cast<std::int64_t>(g.ops().size()));
  if (name == "parameters") {
    std::int64_t parameters = 0;
    for (ir::ValueId p : g.parameters()) parameters += g.value(p).type.elements(1);
    return Value::integer(parameters);
  }
  if (name == "inputs") {
    std::vector<Value> names;
    for (ir::ValueId i : g.inputs()) names.push_back(Value::string(g.value(i).name));
    return Value::list(std::move(names));
  }
  return std::nullopt;
}

std::shared_ptr<ModelObject> modelOf(Evaluator& evaluator, const Value& value,
                                     const SourceSpan& where) {
  Value current = value;
  // A declaration or a factory function is called with its defaults (at most twice:
  // tiny_gpt() returns gpt(...)).
  for (int i = 0; i < 2 && current.kind() == ValueKind::Callable; ++i) {
    Arguments none;
    none.callSpan = where;
    current = evaluator.call(current, none);
  }
  if (current.kind() == ValueKind::Object)
    if (auto model = std::dynamic_pointer_cast<ModelObject>(current.object())) return model;
  failAt(DiagnosticKind::TypeMismatch,
         fmt::format("expected a model such as gpt(layers = 2), not {}", current.aTypeName()), where);
}

}  // namespace meshflow::interp
