#include "interp/Operators.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "interp/Evaluator.h"
#include "interp/Tracing.h"

namespace meshflow::interp {
namespace {

using ast::BinaryOp;

[[noreturn]] void fail(DiagnosticKind kind, std::string message) {
  throw ScriptError(kind, std::move(message));
}

[[noreturn]] void typeMismatch(BinaryOp op, const Value& lhs, const Value& rhs) {
  fail(DiagnosticKind::TypeMismatch, fmt::format("cannot apply `{}` to {} and {}",
                                                 ast::spelling(op), lhs.aTypeName(), rhs.aTypeName()));
}

const char* verb(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "subtract";
    case BinaryOp::Mod: return "take the remainder of";
    default: return "compare";
  }
}

[[noreturn]] void unitMismatch(BinaryOp op, const Value& lhs, const Value& rhs) {
  auto describe = [](const Value& v) {
    return v.kind() == ValueKind::Quantity ? fmt::format("{} ({})", v.repr(), unitName(v.dimension()))
                                           : fmt::format("the number {}", v.repr());
  };
  std::string hint = (lhs.kind() != ValueKind::Quantity || rhs.kind() != ValueKind::Quantity)
                         ? "; give the number a unit"
                         : "; the units differ";
  fail(DiagnosticKind::UnitMismatch,
       fmt::format("cannot {} {} and {}{}", verb(op), describe(lhs), describe(rhs), hint));
}

bool isQuantity(const Value& v) { return v.kind() == ValueKind::Quantity; }
bool isNumeric(const Value& v) { return v.isNumber() || isQuantity(v); }
double magnitude(const Value& v) { return isQuantity(v) ? v.quantityValue() : v.asNumber(); }
Dimension dimensionOf(const Value& v) { return isQuantity(v) ? v.dimension() : Dimension{}; }

std::int8_t exponent(int value) {
  if (value > 64 || value < -64)
    fail(DiagnosticKind::UnitMismatch, "the quantity's unit has too high a power");
  return static_cast<std::int8_t>(value);
}

Dimension combine(Dimension a, Dimension b, int sign) {
  return {exponent(a.bytes + sign * b.bytes), exponent(a.seconds + sign * b.seconds),
          exponent(a.flops + sign * b.flops)};
}

Value checkedFloat(double value) {
  if (std::isnan(value)) fail(DiagnosticKind::InvalidValue, "the result is not a number (NaN)");
  return Value::number(value);
}

Value quantityResult(double value, Dimension d) {
  if (std::isnan(value)) fail(DiagnosticKind::InvalidValue, "the result is not a number (NaN)");
  return Value::quantity(value, d);
}

void requireNonZero(double divisor) {
  if (divisor == 0) fail(DiagnosticKind::DivisionByZero, "division by zero");
}

// + - % on numbers and quantities: both sides need the same dimension.
Value additive(BinaryOp op, const Value& lhs, const Value& rhs) {
  if (dimensionOf(lhs) != dimensionOf(rhs)) unitMismatch(op, lhs, rhs);
  double a = magnitude(lhs), b = magnitude(rhs);
  double result = op == BinaryOp::Add ? a + b : op == BinaryOp::Sub ? a - b : 0;
  if (op == BinaryOp::Mod) {
    requireNonZero(b);
    result = std::fmod(a, b);
    if (result != 0 && ((result < 0) != (b < 0))) result += b;  // the sign of the divisor
  }
  return quantityResult(result, dimensionOf(lhs));
}

Value intArithmetic(BinaryOp op, std::int64_t a, std::int64_t b) {
  std::int64_t result = 0;
  switch (op) {
    case BinaryOp::Add: return Value::integer(checkedAdd(a, b));
    case BinaryOp::Sub:
      if (__builtin_sub_overflow(a, b, &result))
        fail(DiagnosticKind::IntegerOverflow, fmt::format("{} - {} overflows 64 bits", a, b));
      return Value::integer(result);
    case BinaryOp::Mul: return Value::integer(checkedMul(a, b));
    case BinaryOp::Div:
      if (b == 0) fail(DiagnosticKind::DivisionByZero, "division by zero");
      return Value::number(static_cast<double>(a) / static_cast<double>(b));
    case BinaryOp::FloorDiv:
    case BinaryOp::Mod: {
      if (b == 0) fail(DiagnosticKind::DivisionByZero, "integer division by zero");
      if (a == std::numeric_limits<std::int64_t>::min() && b == -1)
        fail(DiagnosticKind::IntegerOverflow, fmt::format("{} // -1 overflows 64 bits", a));
      std::int64_t quotient = a / b, remainder = a % b;
      // Round towards negative infinity, as Python does.
      if (remainder != 0 && ((remainder < 0) != (b < 0))) {
        --quotient;
        remainder += b;
      }
      return Value::integer(op == BinaryOp::FloorDiv ? quotient : remainder);
    }
    case BinaryOp::Pow: {
      if (b < 0) return Value::number(std::pow(static_cast<double>(a), static_cast<double>(b)));
      // Squaring by hand so that an overflow names what the script wrote, not
      // an intermediate product.
      std::int64_t power = 1, base = a;
      bool overflow = false;
      for (std::int64_t e = b; e > 0 && !overflow; e >>= 1) {
        if (e & 1) overflow = __builtin_mul_overflow(power, base, &power);
        if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
      if (overflow)
        fail(DiagnosticKind::IntegerOverflow, fmt::format("{} ** {} overflows 64 bits", a, b));
      return Value::integer(power);
    }
    default: return Value();
  }
}

Value numericArithmetic(BinaryOp op, const Value& lhs, const Value& rhs) {
  if (lhs.isInt() && rhs.isInt()) return intArithmetic(op, lhs.asInt(), rhs.asInt());
  if (op == BinaryOp::Add || op == BinaryOp::Sub || op == BinaryOp::Mod)
    return additive(op, lhs, rhs);
  double a = magnitude(lhs), b = magnitude(rhs);
  Dimension da = dimensionOf(lhs), db = dimensionOf(rhs);
  switch (op) {
    case BinaryOp::Mul: return quantityResult(a * b, combine(da, db, +1));
    case BinaryOp::Div:
      requireNonZero(b);
      return quantityResult(a / b, combine(da, db, -1));
    case BinaryOp::FloorDiv:
      if (da != db) unitMismatch(op, lhs, rhs);
      requireNonZero(b);
      return checkedFloat(std::floor(a / b));
    case BinaryOp::Pow: {
      if (!db.dimensionless()) fail(DiagnosticKind::UnitMismatch, "an exponent cannot have a unit");
      if (da.dimensionless()) return checkedFloat(std::pow(a, b));
      if (!rhs.isInt())
        fail(DiagnosticKind::UnitMismatch, "a quantity can only be raised to an integer power");
      int power = static_cast<int>(std::clamp<std::int64_t>(rhs.asInt(), -100, 100));
      return quantityResult(std::pow(a, b), {exponent(da.bytes * power),
                                             exponent(da.seconds * power),
                                             exponent(da.flops * power)});
    }
    default: return Value();
  }
}

Value repeat(Evaluator& evaluator, const Value& sequence, const Value& count) {
  std::int64_t n = std::max<std::int64_t>(0, count.asInt());
  if (n == 0 || (sequence.isString() ? sequence.asString().empty() : sequence.items().empty()))
    return sequence.isString() ? evaluator.makeString("") : evaluator.makeList({});
  if (sequence.isString()) {
    const std::string& text = sequence.asString();
    evaluator.ensureRoom(static_cast<std::size_t>(
        std::min<double>(static_cast<double>(text.size()) * n, 1e18)));
    std::string result;
    for (std::int64_t i = 0; i < n; ++i) result += text;
    return evaluator.makeString(std::move(result));
  }
  const auto& items = sequence.items();
  evaluator.ensureRoom(static_cast<std::size_t>(
      std::min<double>(static_cast<double>(listBytes(items.size())) * n, 1e18)));
  std::vector<Value> result;
  for (std::int64_t i = 0; i < n; ++i) result.insert(result.end(), items.begin(), items.end());
  return evaluator.makeList(std::move(result));
}

Value concatenate(Evaluator& evaluator, const Value& lhs, const Value& rhs) {
  if (lhs.isString()) {
    evaluator.ensureRoom(lhs.asString().size() + rhs.asString().size());
    return evaluator.makeString(lhs.asString() + rhs.asString());
  }
  std::vector<Value> items = lhs.items();
  items.insert(items.end(), rhs.items().begin(), rhs.items().end());
  return evaluator.makeList(std::move(items));
}

bool isSequence(const Value& v) { return v.isString() || v.kind() == ValueKind::List; }

}  // namespace

std::int64_t checkedAdd(std::int64_t a, std::int64_t b) {
  std::int64_t result;
  if (__builtin_add_overflow(a, b, &result))
    fail(DiagnosticKind::IntegerOverflow, fmt::format("{} + {} overflows 64 bits", a, b));
  return result;
}

std::int64_t checkedMul(std::int64_t a, std::int64_t b) {
  std::int64_t result;
  if (__builtin_mul_overflow(a, b, &result))
    fail(DiagnosticKind::IntegerOverflow, fmt::format("{} * {} overflows 64 bits", a, b));
  return result;
}

int compareValues(const Value& lhs, const Value& rhs) {
  if (isNumeric(lhs) && isNumeric(rhs)) {
    if (dimensionOf(lhs) != dimensionOf(rhs)) unitMismatch(BinaryOp::Lt, lhs, rhs);
    if (lhs.isInt() && rhs.isInt()) return (lhs.asInt() > rhs.asInt()) - (lhs.asInt() < rhs.asInt());
    double a = magnitude(lhs), b = magnitude(rhs);
    if (std::isnan(a) || std::isnan(b))
      fail(DiagnosticKind::InvalidValue, "NaN has no order");
    return (a > b) - (a < b);
  }
  if (lhs.isString() && rhs.isString()) {
    int c = lhs.asString().compare(rhs.asString());
    return (c > 0) - (c < 0);
  }
  if (lhs.kind() == ValueKind::List && rhs.kind() == ValueKind::List) {
    const auto& a = lhs.items();
    const auto& b = rhs.items();
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      if (int c = compareValues(a[i], b[i])) return c;
    return (a.size() > b.size()) - (a.size() < b.size());
  }
  fail(DiagnosticKind::TypeMismatch,
       fmt::format("cannot order {} and {}", lhs.aTypeName(), rhs.aTypeName()));
}

Value binaryOp(Evaluator& evaluator, BinaryOp op, const Value& lhs, const Value& rhs) {
  switch (op) {
    case BinaryOp::Eq: return Value::boolean(lhs == rhs);
    case BinaryOp::Ne: return Value::boolean(!(lhs == rhs));
    case BinaryOp::Lt: return Value::boolean(compareValues(lhs, rhs) < 0);
    case BinaryOp::Le: return Value::boolean(compareValues(lhs, rhs) <= 0);
    case BinaryOp::Gt: return Value::boolean(compareValues(lhs, rhs) > 0);
    case BinaryOp::Ge: return Value::boolean(compareValues(lhs, rhs) >= 0);
    case BinaryOp::Range:
      if (!lhs.isInt() || !rhs.isInt())
        fail(DiagnosticKind::TypeMismatch,
             fmt::format("a range needs int bounds, not {} and {}", lhs.aTypeName(),
                         rhs.aTypeName()));
      return Value::range(lhs.asInt(), rhs.asInt());
    default: break;
  }
  if (isNumeric(lhs) && isNumeric(rhs)) return numericArithmetic(op, lhs, rhs);
  if (op == BinaryOp::Add && lhs.kind() == rhs.kind() && isSequence(lhs))
    return concatenate(evaluator, lhs, rhs);
  if (op == BinaryOp::Mul) {
    // `batch * 64`: a multiple of the symbolic batch size.
    auto a = dimOf(lhs), b = dimOf(rhs);
    if (a && b && a->perBatch != b->perBatch)
      return dimValue(ir::Dim::batch(checkedMul(a->value, b->value)));
  }
  if (op == BinaryOp::Mul && isSequence(lhs) && rhs.isInt()) return repeat(evaluator, lhs, rhs);
  if (op == BinaryOp::Mul && lhs.isInt() && isSequence(rhs)) return repeat(evaluator, rhs, lhs);
  typeMismatch(op, lhs, rhs);
}

Value unaryOp(ast::UnaryOp op, const Value& operand) {
  switch (op) {
    case ast::UnaryOp::Not:
      if (!operand.isBool())
        fail(DiagnosticKind::TypeMismatch,
             fmt::format("`not` needs a bool, not {}", operand.aTypeName()));
      return Value::boolean(!operand.asBool());
    case ast::UnaryOp::Negate:
      if (operand.isInt()) {
        if (operand.asInt() == std::numeric_limits<std::int64_t>::min())
          fail(DiagnosticKind::IntegerOverflow, "negating the smallest int overflows 64 bits");
        return Value::integer(-operand.asInt());
      }
      if (operand.isFloat()) return Value::number(-operand.asFloat());
      if (isQuantity(operand)) return Value::quantity(-operand.quantityValue(), operand.dimension());
      break;
    case ast::UnaryOp::Plus:
      if (isNumeric(operand)) return operand;
      break;
  }
  fail(DiagnosticKind::TypeMismatch,
       fmt::format("cannot negate {}", operand.aTypeName()));
}

}  // namespace meshflow::interp
