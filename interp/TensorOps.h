// Recording tensor operations while a model is traced: the operators of
// tensor values and the primitive ops of LANGUAGE.md as builtins.
#pragma once

#include <memory>
#include <vector>

#include "interp/Ast.h"
#include "interp/Tracing.h"

namespace meshflow::interp {

class Evaluator;
class Environment;

/// The tracer of the model being traced; an InvalidModel error naming `what`
/// when no model is being traced.
const std::shared_ptr<Tracer>& activeTracer(Evaluator& evaluator, const std::string& what);

/// A script value for a traced graph value.
Value tensorValue(Evaluator& evaluator, const std::shared_ptr<Tracer>& tracer, ir::ValueId id);

/// `a + b`, `a * 2` … where one operand is a tensor.
Value tensorBinary(Evaluator& evaluator, ast::BinaryOp op, const Value& lhs, const Value& rhs,
                   const SourceSpan& where);
Value tensorUnary(Evaluator& evaluator, ast::UnaryOp op, const Value& operand,
                  const SourceSpan& where);

/// input, linear, matmul, relu, softmax, layer_norm, embedding, cross_entropy …
void installTensorBuiltins(Environment& env);

}  // namespace meshflow::interp
