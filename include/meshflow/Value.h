// The values of .mesh scripts, as the interpreter and a host see them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace meshflow {

/// Physical dimension of a quantity as exponents of the base units
/// bytes, seconds and FLOP: bytes/s is {1, -1, 0}, FLOP/s is {0, -1, 1}.
struct Dimension {
  std::int8_t bytes = 0;
  std::int8_t seconds = 0;
  std::int8_t flops = 0;

  bool dimensionless() const { return bytes == 0 && seconds == 0 && flops == 0; }
  friend bool operator==(const Dimension&, const Dimension&) = default;
};

/// The dimension's unit written out, such as `B/s` or `FLOP/s`.
std::string unitName(const Dimension& d);

namespace interp {
class Object;
}

enum class ValueKind : std::uint8_t {
  None,
  Auto,      // `auto`: let the planner choose
  Bool,
  Int,       // 64-bit, overflow is an error
  Float,
  Quantity,  // a number with a dimension, in base units
  String,
  List,
  Record,
  Range,
  Callable,  // functions, builtins, host functions and layer/model/cluster declarations
  Object,    // other handles: modules, models, clusters, schedules, and later plans and tensors
};

class Value {
 public:
  Value() = default;  // none

  static Value none() { return {}; }
  static Value autoValue();
  static Value boolean(bool b);
  static Value integer(std::int64_t i);
  static Value number(double f);
  static Value quantity(double value, Dimension d);
  static Value string(std::string s);
  static Value list(std::vector<Value> items);
  /// A record keeps its fields in the order they were written.
  static Value record(std::vector<std::pair<std::string, Value>> fields);
  static Value range(std::int64_t begin, std::int64_t end, std::int64_t step = 1);
  static Value object(ValueKind kind, std::shared_ptr<interp::Object> object);

  ValueKind kind() const { return kind_; }
  bool isNone() const { return kind_ == ValueKind::None; }
  bool isBool() const { return kind_ == ValueKind::Bool; }
  bool isInt() const { return kind_ == ValueKind::Int; }
  bool isFloat() const { return kind_ == ValueKind::Float; }
  bool isNumber() const { return isInt() || isFloat(); }
  bool isString() const { return kind_ == ValueKind::String; }

  bool asBool() const { return scalar_.b; }
  std::int64_t asInt() const { return scalar_.i; }
  double asFloat() const { return scalar_.f; }
  /// Int or Float as a double.
  double asNumber() const { return isInt() ? static_cast<double>(scalar_.i) : scalar_.f; }
  double quantityValue() const { return scalar_.f; }
  Dimension dimension() const { return dimension_; }
  const std::string& asString() const;
  /// The items of a list (empty for other kinds).
  const std::vector<Value>& items() const;
  /// A record's field, or none when absent.
  Value field(const std::string& name) const;

  const std::shared_ptr<interp::Object>& object() const { return object_; }

  /// The type as users read it: `int`, `list`, `quantity`, `function`, `model` …
  std::string typeName() const;
  /// The type name with its article, for messages: `an int`, `a list`.
  std::string aTypeName() const;
  /// As `print` shows it: strings without quotes.
  std::string str() const;
  /// As the REPL shows it: strings quoted and escaped.
  std::string repr() const { return repr(0); }
  /// repr() of a value nested `depth` levels inside others (deep nesting prints `...`).
  std::string repr(int depth) const;

  /// Deep equality; 1 == 1.0. Throws ScriptError for values nested too deeply to compare.
  friend bool operator==(const Value& a, const Value& b);

 private:
  ValueKind kind_ = ValueKind::None;
  Dimension dimension_;
  union {
    bool b;
    std::int64_t i;
    double f;
  } scalar_{};
  std::shared_ptr<interp::Object> object_;
};

}  // namespace meshflow
