#include "interp/Members.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "interp/Evaluator.h"
#include "interp/Operators.h"
#include "interp/PlanObject.h"
#include "interp/Tracing.h"

namespace meshflow::interp {
namespace {

[[noreturn]] void fail(DiagnosticKind kind, std::string message) {
  throw ScriptError(kind, std::move(message));
}

std::map<std::string, MethodSpec> listMethods() {
  return {
      {"append", {{{"item", {}}}, [](Evaluator& ev, BoundArgs& a) {
         auto& list = static_cast<ListObject&>(*a[0].object());
         list.chargeMore(sizeof(Value));
         list.items.push_back(a[1]);
         return Value();
       }}},
      {"pop", {{}, [](Evaluator&, BoundArgs& a) {
         auto& list = static_cast<ListObject&>(*a[0].object());
         if (list.items.empty()) fail(DiagnosticKind::IndexOutOfRange, "pop from an empty list");
         Value last = list.items.back();
         list.items.pop_back();
         return last;
       }}},
      {"contains", {{{"item", {}}}, [](Evaluator&, BoundArgs& a) {
         const auto& items = a[0].items();
         return Value::boolean(std::find(items.begin(), items.end(), a[1]) != items.end());
       }}},
      {"reversed", {{}, [](Evaluator& ev, BoundArgs& a) {
         std::vector<Value> items(a[0].items().rbegin(), a[0].items().rend());
         return ev.makeList(std::move(items));
       }}},
      {"sorted", {{}, [](Evaluator& ev, BoundArgs& a) {
         std::vector<Value> items = a[0].items();
         std::stable_sort(items.begin(), items.end(),
                          [](const Value& x, const Value& y) { return compareValues(x, y) < 0; });
         return ev.makeList(std::move(items));
       }}},
  };
}

std::map<std::string, MethodSpec> stringMethods() {
  auto text = [](const BoundArgs& a, std::size_t i) -> const std::string& {
    if (!a[i].isString())
      fail(DiagnosticKind::TypeMismatch, fmt::format("expected a string, got {}", a[i].aTypeName()));
    return a[i].asString();
  };
  return {
      {"upper", {{}, [](Evaluator& ev, BoundArgs& a) {
         std::string s = a[0].asString();
         for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
         return ev.makeString(std::move(s));
       }}},
      {"lower", {{}, [](Evaluator& ev, BoundArgs& a) {
         std::string s = a[0].asString();
         for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
         return ev.makeString(std::move(s));
       }}},
      {"strip", {{}, [](Evaluator& ev, BoundArgs& a) {
         const std::string& s = a[0].asString();
         auto begin = s.find_first_not_of(" \t\r\n");
         if (begin == std::string::npos) return ev.makeString("");
         return ev.makeString(s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1));
       }}},
      {"contains", {{{"part", {}}}, [text](Evaluator&, BoundArgs& a) {
         return Value::boolean(a[0].asString().find(text(a, 1)) != std::string::npos);
       }}},
      {"starts_with", {{{"prefix", {}}}, [text](Evaluator&, BoundArgs& a) {
         return Value::boolean(a[0].asString().rfind(text(a, 1), 0) == 0);
       }}},
      {"ends_with", {{{"suffix", {}}}, [text](Evaluator&, BoundArgs& a) {
         const std::string& s = a[0].asString();
         const std::string& suffix = text(a, 1);
         return Value::boolean(s.size() >= suffix.size() &&
                               s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0);
       }}},
      {"split", {{{"separator", Value()}}, [text](Evaluator& ev, BoundArgs& a) {
         const std::string& s = a[0].asString();
         std::vector<Value> parts;
         if (a[1].isNone()) {
           std::size_t i = 0;
           while (i < s.size()) {
             i = s.find_first_not_of(" \t\r\n", i);
             if (i == std::string::npos) break;
             std::size_t end = std::min(s.find_first_of(" \t\r\n", i), s.size());
             parts.push_back(ev.makeString(s.substr(i, end - i)));
             i = end;
           }
           return ev.makeList(std::move(parts));
         }
         const std::string& separator = text(a, 1);
         if (separator.empty()) fail(DiagnosticKind::InvalidValue, "split() separator is empty");
         std::size_t start = 0;
         for (std::size_t at; (at = s.find(separator, start)) != std::string::npos;
              start = at + separator.size())
           parts.push_back(ev.makeString(s.substr(start, at - start)));
         parts.push_back(ev.makeString(s.substr(start)));
         return ev.makeList(std::move(parts));
       }}},
      {"join", {{{"items", {}}}, [](Evaluator& ev, BoundArgs& a) {
         if (a[1].kind() != ValueKind::List)
           fail(DiagnosticKind::TypeMismatch, fmt::format("join() needs a list, not {}", a[1].aTypeName()));
         std::string out;
         for (std::size_t i = 0; i < a[1].items().size(); ++i) {
           if (i) out += a[0].asString();
           out += a[1].items()[i].str();
           ev.ensureRoom(out.size());
         }
         return ev.makeString(std::move(out));
       }}},
      {"replace", {{{"old", {}}, {"new", {}}}, [text](Evaluator& ev, BoundArgs& a) {
         std::string s = a[0].asString();
         const std::string& from = text(a, 1);
         const std::string& to = text(a, 2);
         if (from.empty()) fail(DiagnosticKind::InvalidValue, "replace() of an empty string");
         std::string out;
         std::size_t start = 0;
         for (std::size_t at; (at = s.find(from, start)) != std::string::npos; start = at + from.size()) {
           out += s.substr(start, at - start) + to;
           ev.ensureRoom(out.size());
         }
         return ev.makeString(out + s.substr(start));
       }}},
  };
}

std::map<std::string, MethodSpec> recordMethods() {
  return {
      {"keys", {{}, [](Evaluator& ev, BoundArgs& a) {
         std::vector<Value> keys;
         for (const auto& name : a[0].object()->fieldNames()) keys.push_back(ev.makeString(name));
         return ev.makeList(std::move(keys));
       }}},
      {"has", {{{"name", {}}}, [](Evaluator&, BoundArgs& a) {
         return Value::boolean(a[1].isString() && a[0].object()->field(a[1].asString()).has_value());
       }}},
      {"get", {{{"name", {}}, {"default", Value()}}, [](Evaluator&, BoundArgs& a) {
         if (!a[1].isString()) fail(DiagnosticKind::TypeMismatch, "get() needs a field name string");
         return a[0].object()->field(a[1].asString()).value_or(a[2]);
       }}},
  };
}

std::map<std::string, MethodSpec> methodsOf(const Value& value) {
  switch (value.kind()) {
    case ValueKind::List: return listMethods();
    case ValueKind::String: return stringMethods();
    case ValueKind::Record: return recordMethods();
    case ValueKind::Object:
      if (dynamic_cast<const PlanObject*>(value.object().get())) return planMethods();
      return {};
    default: return {};
  }
}

std::int64_t normaliseIndex(const Value& index, std::int64_t size, const char* what) {
  if (!index.isInt())
    fail(DiagnosticKind::TypeMismatch,
         fmt::format("{} indices must be ints, not {}", what, index.aTypeName()));
  std::int64_t i = index.asInt();
  if (i < 0 && i >= -size) i += size;
  if (i < 0 || i >= size)
    fail(DiagnosticKind::IndexOutOfRange,
         fmt::format("index {} is out of range for a {} of length {}", index.asInt(), what, size));
  return i;
}

void requireOneIndex(const Value& object, const std::vector<Value>& indices) {
  if (indices.size() != 1)
    fail(DiagnosticKind::TypeMismatch,
         fmt::format("{} takes one index, not {}", object.aTypeName(), indices.size()));
}

// `f32[batch, 1024]`: a dtype indexed by its dims is a tensor type.
Value tensorType(ir::DType dtype, const std::vector<Value>& indices) {
  ir::TensorType type{dtype, {}};
  for (const auto& index : indices) {
    auto dim = dimOf(index);
    if (!dim || dim->value < 1)
      fail(DiagnosticKind::TypeMismatch,
           fmt::format("a tensor dimension must be a positive int or `batch`, not {}", index.repr()));
    type.shape.push_back(*dim);
  }
  return Value::object(ValueKind::Object, std::make_shared<TensorTypeObject>(std::move(type)));
}

}  // namespace

std::vector<std::string> codePointsOf(const std::string& text) {
  std::vector<std::string> characters;
  for (std::size_t i = 0; i < text.size();) {
    std::size_t length = 1;
    while (i + length < text.size() && (static_cast<unsigned char>(text[i + length]) & 0xC0) == 0x80)
      ++length;
    characters.push_back(text.substr(i, length));
    i += length;
  }
  return characters;
}

Value member(Evaluator& evaluator, const Value& object, const std::string& name) {
  if (object.object())
    if (auto field = object.object()->field(name)) return *field;
  auto methods = methodsOf(object);
  if (auto it = methods.find(name); it != methods.end()) {
    std::vector<ParamSpec> params = {{"self", {}}};
    params.insert(params.end(), it->second.params.begin(), it->second.params.end());
    auto method = std::make_shared<Builtin>(name, std::move(params), it->second.body);
    auto bound = std::make_shared<BoundMethod>(object, std::move(method));
    evaluator.heap().adopt(bound, kObjectOverhead);
    return Value::object(ValueKind::Callable, std::move(bound));
  }
  std::string available;
  for (const auto& candidate : memberNames(object))
    available += (available.empty() ? "" : ", ") + candidate;
  fail(DiagnosticKind::UnknownField,
       fmt::format("{} has no field or method '{}'{}", object.aTypeName(), name,
                   available.empty() ? "" : " (it has: " + available + ")"));
}

std::vector<std::string> memberNames(const Value& object) {
  std::vector<std::string> names;
  if (object.object()) names = object.object()->fieldNames();
  for (const auto& [name, spec] : methodsOf(object)) names.push_back(name);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Value indexValue(Evaluator& evaluator, const Value& object, const std::vector<Value>& indices) {
  switch (object.kind()) {
    case ValueKind::List: {
      requireOneIndex(object, indices);
      const auto& items = object.items();
      return items[normaliseIndex(indices[0], static_cast<std::int64_t>(items.size()), "list")];
    }
    case ValueKind::String: {
      requireOneIndex(object, indices);
      auto characters = codePointsOf(object.asString());
      return evaluator.makeString(
          characters[normaliseIndex(indices[0], static_cast<std::int64_t>(characters.size()), "string")]);
    }
    case ValueKind::Range: {
      requireOneIndex(object, indices);
      const auto& range = static_cast<const RangeObject&>(*object.object());
      return Value::integer(range.at(normaliseIndex(indices[0], range.size(), "range")));
    }
    case ValueKind::Record: {
      requireOneIndex(object, indices);
      if (!indices[0].isString())
        fail(DiagnosticKind::TypeMismatch,
             fmt::format("a record is indexed by a field name string, not {}", indices[0].aTypeName()));
      if (auto field = object.object()->field(indices[0].asString())) return *field;
      fail(DiagnosticKind::UnknownField,
           fmt::format("the record has no field '{}'", indices[0].asString()));
    }
    case ValueKind::Object:
      if (auto* dtype = dynamic_cast<DTypeObject*>(object.object().get()))
        return tensorType(dtype->dtype, indices);
      [[fallthrough]];
    default:
      fail(DiagnosticKind::TypeMismatch, fmt::format("{} cannot be indexed", object.aTypeName()));
  }
}

void setIndex(Evaluator& evaluator, const Value& object, const std::vector<Value>& indices,
              Value value) {
  if (object.kind() == ValueKind::List) {
    requireOneIndex(object, indices);
    auto& items = static_cast<ListObject&>(*object.object()).items;
    items[normaliseIndex(indices[0], static_cast<std::int64_t>(items.size()), "list")] = std::move(value);
    return;
  }
  if (object.kind() == ValueKind::Record) {
    requireOneIndex(object, indices);
    if (!indices[0].isString())
      fail(DiagnosticKind::TypeMismatch, "a record is indexed by a field name string");
    static_cast<RecordObject&>(*object.object()).set(indices[0].asString(), std::move(value));
    return;
  }
  fail(DiagnosticKind::TypeMismatch,
       fmt::format("elements of {} cannot be assigned", object.aTypeName()));
}

}  // namespace meshflow::interp
