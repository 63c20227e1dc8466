#include "interp/TensorOps.h"

#include <fmt/format.h>

#include "interp/Evaluator.h"

namespace meshflow::interp {
namespace {

ir::ValueId constant(Tracer& tracer, double value, const SourceSpan& where) {
  return tracer.record(ir::OpKind::Constant, {}, {{"value", value}}, where)[0];
}

// A tensor operand of a traced op; plain numbers become f32 constants.
ir::ValueId operand(Tracer& tracer, const Value& value, const SourceSpan& where) {
  if (TensorObject* tensor = asTensor(value)) {
    if (tensor->tracer().get() != &tracer)
      throw ScriptError(DiagnosticKind::InvalidModel,
                        "this tensor belongs to another traced model");
    return tensor->id();
  }
  if (value.isNumber()) return constant(tracer, value.asNumber(), where);
  throw ScriptError(DiagnosticKind::TypeMismatch,
                    fmt::format("expected a tensor or a number, not {}", value.aTypeName()));
}

}  // namespace

const std::shared_ptr<Tracer>& activeTracer(Evaluator& evaluator, const std::string& what) {
  const auto& tracer = evaluator.state().tracer;
  if (!tracer)
    throw ScriptError(DiagnosticKind::InvalidModel,
                      fmt::format("{} works only while a model is traced (in a model's body or "
                                  "a layer it calls)",
                                  what));
  return tracer;
}

Value tensorValue(Evaluator& evaluator, const std::shared_ptr<Tracer>& tracer, ir::ValueId id) {
  auto object = std::make_shared<TensorObject>(tracer, id);
  evaluator.heap().adopt(object, kObjectOverhead);
  return Value::object(ValueKind::Object, std::move(object));
}

Value tensorBinary(Evaluator& evaluator, ast::BinaryOp op, const Value& lhs, const Value& rhs,
                   const SourceSpan& where) {
  const auto& tracer = activeTracer(evaluator, "tensor arithmetic");
  // Multiplying or dividing by a plain number scales.
  if ((op == ast::BinaryOp::Mul || op == ast::BinaryOp::Div) && (lhs.isNumber() || rhs.isNumber())) {
    const Value& tensor = lhs.isNumber() ? rhs : lhs;
    double factor = (lhs.isNumber() ? lhs : rhs).asNumber();
    if (op == ast::BinaryOp::Div) {
      if (lhs.isNumber())
        throw ScriptError(DiagnosticKind::TypeMismatch, "a number cannot be divided by a tensor");
      if (factor == 0) throw ScriptError(DiagnosticKind::DivisionByZero, "division by zero");
      factor = 1 / factor;
    }
    return tensorValue(evaluator, tracer,
                       tracer->record(ir::OpKind::Scale, {operand(*tracer, tensor, where)},
                                      {{"factor", factor}}, where)[0]);
  }
  ir::OpKind kind;
  switch (op) {
    case ast::BinaryOp::Add: kind = ir::OpKind::Add; break;
    case ast::BinaryOp::Sub: kind = ir::OpKind::Sub; break;
    case ast::BinaryOp::Mul: kind = ir::OpKind::Mul; break;
    case ast::BinaryOp::Div: kind = ir::OpKind::Div; break;
    default:
      throw ScriptError(DiagnosticKind::TypeMismatch,
                        fmt::format("tensors support + - * /, not `{}`", ast::spelling(op)));
  }
  ir::ValueId a = operand(*tracer, lhs, where);
  ir::ValueId b = operand(*tracer, rhs, where);
  return tensorValue(evaluator, tracer, tracer->record(kind, {a, b}, {}, where)[0]);
}

Value tensorUnary(Evaluator& evaluator, ast::UnaryOp op, const Value& value,
                  const SourceSpan& where) {
  const auto& tracer = activeTracer(evaluator, "tensor arithmetic");
  if (op == ast::UnaryOp::Plus) return value;
  if (op == ast::UnaryOp::Not)
    throw ScriptError(DiagnosticKind::TypeMismatch, "`not` needs a bool, not a tensor");
  return tensorValue(evaluator, tracer,
                     tracer->record(ir::OpKind::Neg, {operand(*tracer, value, where)}, {}, where)[0]);
}

}  // namespace meshflow::interp
