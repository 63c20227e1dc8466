// Arithmetic, comparison and unit rules of .mesh operators.
#pragma once

#include "interp/Ast.h"
#include "meshflow/Value.h"

namespace meshflow::interp {

class Evaluator;

/// `lhs op rhs` for every binary operator except `and`/`or` (which short-circuit).
/// Integer overflow, division by zero, unit mismatches and type mismatches are
/// ScriptErrors.
Value binaryOp(Evaluator& evaluator, ast::BinaryOp op, const Value& lhs, const Value& rhs);
Value unaryOp(ast::UnaryOp op, const Value& operand);

/// Checked 64-bit arithmetic (IntegerOverflow on overflow).
std::int64_t checkedAdd(std::int64_t a, std::int64_t b);
std::int64_t checkedMul(std::int64_t a, std::int64_t b);

/// -1, 0 or 1; TypeMismatch/UnitMismatch if the values have no order.
int compareValues(const Value& lhs, const Value& rhs);

}  // namespace meshflow::interp
