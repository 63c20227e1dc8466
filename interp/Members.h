// Fields, methods and indexing of values.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "interp/Callable.h"
#include "meshflow/Value.h"

namespace meshflow::interp {

class Evaluator;

/// A method of one type of value: its parameters after the receiver, and a body
/// that receives the receiver as values[0].
struct MethodSpec {
  std::vector<ParamSpec> params;
  Builtin::Body body;
};
using MethodTable = std::map<std::string, MethodSpec>;

/// `object.name`: a field of the value, or one of its methods bound to it.
Value member(Evaluator& evaluator, const Value& object, const std::string& name);
/// Field and method names of a value, sorted (for completion and error notes).
std::vector<std::string> memberNames(const Value& object);

/// `object[i, ...]` and `object[i] = value`.
Value indexValue(Evaluator& evaluator, const Value& object, const std::vector<Value>& indices);
void setIndex(Evaluator& evaluator, const Value& object, const std::vector<Value>& indices,
              Value value);

/// The UTF-8 characters of `text`, one string each.
std::vector<std::string> codePointsOf(const std::string& text);

}  // namespace meshflow::interp
