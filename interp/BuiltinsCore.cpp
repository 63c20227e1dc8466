// print, assert and the small standard library of pure functions.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "interp/Builtins.h"
#include "interp/Evaluator.h"
#include "interp/Members.h"
#include "interp/Operators.h"

namespace meshflow::interp {
namespace {

Value print(Evaluator& ev, BoundArgs& a) {
  std::string line;
  for (std::size_t i = 0; i < a.rest.size(); ++i) line += (i ? " " : "") + a.rest[i].str();
  ev.write(line + "\n");
  return Value();
}

Value assertion(Evaluator&, BoundArgs& a) {
  if (!a[0].isBool())
    argumentError(a, 0, DiagnosticKind::TypeMismatch,
                  fmt::format("assert() needs a bool condition, not {}", a[0].aTypeName()));
  if (a[0].asBool()) return Value();
  std::string message = a[1].isNone() ? "assertion failed" : "assertion failed: " + a[1].str();
  failAt(DiagnosticKind::AssertionFailed, message, a.callSpan);
}

Value length(Evaluator&, BoundArgs& a) {
  const Value& v = a[0];
  switch (v.kind()) {
    case ValueKind::String:
      return Value::integer(static_cast<std::int64_t>(codePointsOf(v.asString()).size()));
    case ValueKind::List: return Value::integer(static_cast<std::int64_t>(v.items().size()));
    case ValueKind::Record:
      return Value::integer(static_cast<std::int64_t>(v.object()->fieldNames().size()));
    case ValueKind::Range:
      return Value::integer(static_cast<const RangeObject&>(*v.object()).size());
    default:
      argumentError(a, 0, DiagnosticKind::TypeMismatch,
                    fmt::format("len() of {} is not defined", v.aTypeName()));
  }
}

Value range(Evaluator&, BoundArgs& a) {
  std::int64_t start = 0, stop = 0;
  if (a[1].isNone()) {
    stop = intArg(a, 0, "range()'s stop");
  } else {
    start = intArg(a, 0, "range()'s start");
    stop = intArg(a, 1, "range()'s stop");
  }
  std::int64_t step = intArg(a, 2, "range()'s step");
  if (step == 0) argumentError(a, 2, DiagnosticKind::InvalidValue, "range() step cannot be zero");
  return Value::range(start, stop, step);
}

// min/max take either several arguments or one list.
Value extreme(BoundArgs& a, bool wantMax, const char* name) {
  std::vector<Value> candidates = a.rest;
  if (candidates.size() == 1 && candidates[0].kind() == ValueKind::List)
    candidates = candidates[0].items();
  if (candidates.empty())
    failAt(DiagnosticKind::ArgumentCount, fmt::format("{}() of nothing", name), a.callSpan);
  Value best = candidates[0];
  for (std::size_t i = 1; i < candidates.size(); ++i) {
    int order = compareValues(candidates[i], best);
    if (wantMax ? order > 0 : order < 0) best = candidates[i];
  }
  return best;
}

Value sum(Evaluator& ev, BoundArgs& a) {
  if (a[0].kind() != ValueKind::List && a[0].kind() != ValueKind::Range)
    argumentError(a, 0, DiagnosticKind::TypeMismatch,
                  fmt::format("sum() needs a list or range, not {}", a[0].aTypeName()));
  // Without a start the sum starts from the first item, so quantities add up
  // (sum([1GB, 2GB]) is 3 GB rather than an error about adding 0 and 1 GB).
  const auto& items = a[0].items();
  bool fromFirst = a[1].isNone() && !items.empty();
  Value total = fromFirst ? items[0] : a[1].isNone() ? Value::integer(0) : a[1];
  if (a[0].kind() == ValueKind::Range) {
    const auto& r = static_cast<const RangeObject&>(*a[0].object());
    for (std::int64_t i = 0, n = r.size(); i < n; ++i) {
      total = binaryOp(ev, ast::BinaryOp::Add, total, Value::integer(r.at(i)));
      ev.step();
    }
    return total;
  }
  for (std::size_t i = fromFirst ? 1 : 0; i < items.size(); ++i)
    total = binaryOp(ev, ast::BinaryOp::Add, total, items[i]);
  return total;
}

Value toInt(Evaluator&, BoundArgs& a) {
  const Value& v = a[0];
  if (v.isInt()) return v;
  if (v.isBool()) return Value::integer(v.asBool());
  if (v.isFloat()) {
    double truncated = std::trunc(v.asFloat());
    if (!(truncated >= -9.2233720368547758e18 && truncated < 9.2233720368547758e18))
      argumentError(a, 0, DiagnosticKind::IntegerOverflow,
                    fmt::format("{} does not fit in a 64-bit int", v.repr()));
    return Value::integer(static_cast<std::int64_t>(truncated));
  }
  if (v.isString()) {
    std::string text = v.asString();
    std::size_t used = 0;
    long long parsed = 0;
    try {
      parsed = std::stoll(text, &used);
    } catch (const std::out_of_range&) {
      argumentError(a, 0, DiagnosticKind::IntegerOverflow,
                    fmt::format("\"{}\" does not fit in a 64-bit int", text));
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != text.size())
      argumentError(a, 0, DiagnosticKind::InvalidValue, fmt::format("\"{}\" is not an int", text));
    return Value::integer(parsed);
  }
  argumentError(a, 0, DiagnosticKind::TypeMismatch,
                fmt::format("int() cannot convert {}", v.aTypeName()));
}

Value toFloat(Evaluator&, BoundArgs& a) {
  const Value& v = a[0];
  if (v.isNumber()) return Value::number(v.asNumber());
  // A quantity becomes its number in base units: float(1KB) == 1000.0.
  if (v.kind() == ValueKind::Quantity) return Value::number(v.quantityValue());
  if (v.isString()) {
    std::size_t used = 0;
    double parsed = 0;
    try {
      parsed = std::stod(v.asString(), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != v.asString().size())
      argumentError(a, 0, DiagnosticKind::InvalidValue,
                    fmt::format("\"{}\" is not a number", v.asString()));
    return Value::number(parsed);
  }
  argumentError(a, 0, DiagnosticKind::TypeMismatch,
                fmt::format("float() cannot convert {}", v.aTypeName()));
}

Value absolute(Evaluator&, BoundArgs& a) {
  const Value& v = a[0];
  if (v.isInt()) {
    if (v.asInt() == std::numeric_limits<std::int64_t>::min())
      argumentError(a, 0, DiagnosticKind::IntegerOverflow, "abs() of the smallest int overflows");
    return Value::integer(std::abs(v.asInt()));
  }
  if (v.isFloat()) return Value::number(std::fabs(v.asFloat()));
  if (v.kind() == ValueKind::Quantity)
    return Value::quantity(std::fabs(v.quantityValue()), v.dimension());
  argumentError(a, 0, DiagnosticKind::TypeMismatch,
                fmt::format("abs() needs a number, not {}", v.aTypeName()));
}

Value toList(Evaluator& ev, BoundArgs& a) {
  const Value& v = a[0];
  if (v.kind() == ValueKind::List) return ev.makeList(v.items());
  if (v.kind() == ValueKind::Range) {
    const auto& r = static_cast<const RangeObject&>(*v.object());
    ev.ensureRoom(listBytes(static_cast<std::size_t>(r.size())));
    std::vector<Value> items;
    items.reserve(static_cast<std::size_t>(r.size()));
    for (std::int64_t i = 0; i < r.size(); ++i) items.push_back(Value::integer(r.at(i)));
    return ev.makeList(std::move(items));
  }
  if (v.isString()) {
    std::vector<Value> items;
    for (auto& c : codePointsOf(v.asString())) items.push_back(ev.makeString(c));
    return ev.makeList(std::move(items));
  }
  argumentError(a, 0, DiagnosticKind::TypeMismatch,
                fmt::format("list() cannot convert {}", v.aTypeName()));
}

}  // namespace

void installCoreBuiltins(Environment& env) {
  defineBuiltin(env, "print", {}, print, true);
  defineBuiltin(env, "assert", {{"condition", {}}, {"message", Value()}}, assertion);
  defineBuiltin(env, "len", {{"value", {}}}, length);
  defineBuiltin(env, "range", {{"start", {}}, {"stop", Value()}, {"step", Value::integer(1)}}, range);
  defineBuiltin(env, "min", {}, [](Evaluator&, BoundArgs& a) { return extreme(a, false, "min"); }, true);
  defineBuiltin(env, "max", {}, [](Evaluator&, BoundArgs& a) { return extreme(a, true, "max"); }, true);
  defineBuiltin(env, "sum", {{"values", {}}, {"start", Value()}}, sum);
  defineBuiltin(env, "str", {{"value", {}}},
                [](Evaluator& ev, BoundArgs& a) { return ev.makeString(a[0].str()); });
  defineBuiltin(env, "repr", {{"value", {}}},
                [](Evaluator& ev, BoundArgs& a) { return ev.makeString(a[0].repr()); });
  defineBuiltin(env, "type", {{"value", {}}},
                [](Evaluator& ev, BoundArgs& a) { return ev.makeString(a[0].typeName()); });
  defineBuiltin(env, "int", {{"value", {}}}, toInt);
  defineBuiltin(env, "float", {{"value", {}}}, toFloat);
  defineBuiltin(env, "abs", {{"value", {}}}, absolute);
  defineBuiltin(env, "list", {{"value", {}}}, toList);
}

}  // namespace meshflow::interp
