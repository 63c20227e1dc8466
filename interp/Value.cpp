#include "meshflow/Value.h"

#include <fmt/format.h>

#include "interp/Object.h"
#include "interp/Units.h"
#include "meshflow/Error.h"

namespace meshflow {

Value Value::autoValue() {
  Value v;
  v.kind_ = ValueKind::Auto;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = ValueKind::Bool;
  v.scalar_.b = b;
  return v;
}

Value Value::integer(std::int64_t i) {
  Value v;
  v.kind_ = ValueKind::Int;
  v.scalar_.i = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = ValueKind::Float;
  v.scalar_.f = f;
  return v;
}

Value Value::quantity(double value, Dimension d) {
  if (d.dimensionless()) return number(value);
  Value v;
  v.kind_ = ValueKind::Quantity;
  v.scalar_.f = value;
  v.dimension_ = d;
  return v;
}

Value Value::string(std::string s) {
  return object(ValueKind::String, std::make_shared<interp::StringObject>(std::move(s)));
}

Value Value::list(std::vector<Value> items) {
  return object(ValueKind::List, std::make_shared<interp::ListObject>(std::move(items)));
}

Value Value::record(std::vector<std::pair<std::string, Value>> fields) {
  return object(ValueKind::Record, std::make_shared<interp::RecordObject>(std::move(fields)));
}

Value Value::range(std::int64_t begin, std::int64_t end, std::int64_t step) {
  return object(ValueKind::Range, std::make_shared<interp::RangeObject>(begin, end, step));
}

Value Value::object(ValueKind kind, std::shared_ptr<interp::Object> object) {
  Value v;
  v.kind_ = kind;
  v.object_ = std::move(object);
  return v;
}

const std::string& Value::asString() const {
  static const std::string kEmpty;
  if (kind_ != ValueKind::String) return kEmpty;
  return static_cast<const interp::StringObject&>(*object_).text;
}

const std::vector<Value>& Value::items() const {
  static const std::vector<Value> kEmpty;
  if (kind_ != ValueKind::List) return kEmpty;
  return static_cast<const interp::ListObject&>(*object_).items;
}

Value Value::field(const std::string& name) const {
  if (!object_) return {};
  return object_->field(name).value_or(Value{});
}

std::string Value::typeName() const {
  switch (kind_) {
    case ValueKind::None: return "none";
    case ValueKind::Auto: return "auto";
    case ValueKind::Bool: return "bool";
    case ValueKind::Int: return "int";
    case ValueKind::Float: return "float";
    case ValueKind::Quantity: return fmt::format("quantity ({})", unitName(dimension_));
    default: return object_->typeName();
  }
}

std::string Value::aTypeName() const {
  std::string name = typeName();
  bool vowel = !name.empty() && std::string_view("aeiou").find(name[0]) != std::string_view::npos;
  return (vowel ? "an " : "a ") + name;
}

std::string Value::str() const {
  if (kind_ == ValueKind::String) return asString();
  return repr();
}

std::string Value::repr(int depth) const {
  switch (kind_) {
    case ValueKind::None: return "none";
    case ValueKind::Auto: return "auto";
    case ValueKind::Bool: return scalar_.b ? "true" : "false";
    case ValueKind::Int: return fmt::format("{}", scalar_.i);
    case ValueKind::Float: return interp::formatFloat(scalar_.f);
    case ValueKind::Quantity: return interp::formatQuantity(scalar_.f, dimension_);
    default: return object_->repr(depth);
  }
}

namespace {

bool equalAt(const Value& a, const Value& b, int depth);

bool equalItems(const std::vector<Value>& x, const std::vector<Value>& y, int depth) {
  if (x.size() != y.size()) return false;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!equalAt(x[i], y[i], depth + 1)) return false;
  return true;
}

}  // namespace

bool operator==(const Value& a, const Value& b) { return equalAt(a, b, 0); }

namespace {

bool equalAt(const Value& a, const Value& b, int depth) {
  if (depth > 256)
    throw ScriptError(DiagnosticKind::InvalidValue, "values nest too deeply to compare");
  if (a.object() && a.object() == b.object()) return true;
  if (a.isNumber() && b.isNumber()) {
    if (a.isInt() && b.isInt()) return a.asInt() == b.asInt();
    return a.asNumber() == b.asNumber();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::None:
    case ValueKind::Auto: return true;
    case ValueKind::Bool: return a.asBool() == b.asBool();
    case ValueKind::Quantity:
      return a.dimension() == b.dimension() && a.quantityValue() == b.quantityValue();
    case ValueKind::String: return a.asString() == b.asString();
    case ValueKind::List: return equalItems(a.items(), b.items(), depth);
    case ValueKind::Record: {
      const auto& x = static_cast<const interp::RecordObject&>(*a.object()).fields;
      const auto& y = static_cast<const interp::RecordObject&>(*b.object()).fields;
      if (x.size() != y.size()) return false;
      for (std::size_t i = 0; i < x.size(); ++i)
        if (x[i].first != y[i].first || !equalAt(x[i].second, y[i].second, depth + 1)) return false;
      return true;
    }
    case ValueKind::Range: {
      const auto& x = static_cast<const interp::RangeObject&>(*a.object());
      const auto& y = static_cast<const interp::RangeObject&>(*b.object());
      return x.begin == y.begin && x.end == y.end && x.step == y.step;
    }
    default: return false;
  }
}

}  // namespace

}  // namespace meshflow
