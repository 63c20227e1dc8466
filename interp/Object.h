// Heap payloads of Values: strings, lists, records, ranges, and the base of
// every handle (callables, modules, models, clusters, schedules, later plans).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "interp/Heap.h"
#include "meshflow/Value.h"

namespace meshflow::interp {

class Object : public std::enable_shared_from_this<Object> {
 public:
  virtual ~Object();
  /// The type name users see (`list`, `function`, `cluster` …).
  virtual std::string typeName() const = 0;
  /// Text for print() and the REPL; `depth` is how deep inside other values it is.
  virtual std::string repr(int depth) const = 0;
  /// repr(depth) appended to `out`. Lists and records write their items
  /// straight into it, so the text of nested containers is made once, not
  /// copied up level by level, and its limit is checked on the whole text.
  virtual void appendRepr(std::string& out, int depth) const { out += repr(depth); }
  /// A named field of this value (`r.name`, `m.layers`), or nullopt.
  virtual std::optional<Value> field(const std::string& name) const { return std::nullopt; }
  /// Names for field access and tab completion, in a stable order.
  virtual std::vector<std::string> fieldNames() const { return {}; }
  /// Drops references to other objects; called when the interpreter dies.
  virtual void clearReferences() {}
  /// True if the object can refer to other objects (and so be part of a cycle).
  virtual bool holdsReferences() const { return false; }

  /// Records `bytes` against `account` (released when the object dies).
  void setAccount(std::shared_ptr<MemoryAccount> account, std::size_t bytes);
  /// Grows the charged size, e.g. when a list is appended to.
  void chargeMore(std::size_t bytes);
  /// Throws a MemoryLimit ScriptError when `bytes` more (a text being made
  /// of this value, not yet held) would pass the memory limit: a list that
  /// holds one list many times over has a text exponential in its size.
  void checkTextRoom(std::size_t bytes) const;

 private:
  std::shared_ptr<MemoryAccount> account_;
  std::size_t charged_ = 0;
};

class StringObject final : public Object {
 public:
  explicit StringObject(std::string text) : text(std::move(text)) {}
  std::string typeName() const override { return "string"; }
  std::string repr(int depth) const override;
  std::string text;
};

/// Releases `values` without recursing: a list nested a million levels deep
/// must not overflow the native stack when it dies.
void releaseWithoutRecursion(std::vector<Value>& values);

class ListObject final : public Object {
 public:
  explicit ListObject(std::vector<Value> items) : items(std::move(items)) {}
  ~ListObject() override { releaseWithoutRecursion(items); }
  std::string typeName() const override { return "list"; }
  std::string repr(int depth) const override;
  void appendRepr(std::string& out, int depth) const override;
  void clearReferences() override { items.clear(); }
  bool holdsReferences() const override { return true; }
  std::vector<Value> items;
};

class RecordObject final : public Object {
 public:
  explicit RecordObject(std::vector<std::pair<std::string, Value>> fields)
      : fields(std::move(fields)) {}
  ~RecordObject() override;
  std::string typeName() const override { return "record"; }
  std::string repr(int depth) const override;
  void appendRepr(std::string& out, int depth) const override;
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override;
  void clearReferences() override { fields.clear(); }
  bool holdsReferences() const override { return true; }
  /// Sets an existing field or appends a new one.
  void set(const std::string& name, Value value);
  std::vector<std::pair<std::string, Value>> fields;
};

class RangeObject final : public Object {
 public:
  RangeObject(std::int64_t begin, std::int64_t end, std::int64_t step)
      : begin(begin), end(end), step(step) {}
  std::string typeName() const override { return "range"; }
  std::string repr(int depth) const override;
  std::optional<Value> field(const std::string& name) const override;
  std::vector<std::string> fieldNames() const override { return {"start", "stop", "step"}; }
  std::int64_t size() const;
  std::int64_t at(std::int64_t index) const { return begin + index * step; }
  std::int64_t begin, end, step;
};

/// Values nested deeper than this print as `...`; so does a container inside
/// itself (a list may contain itself).
inline constexpr int kMaxReprDepth = 32;

/// Approximate bytes a value of each shape holds, for the memory limit.
inline constexpr std::size_t kObjectOverhead = 64;
std::size_t stringBytes(const std::string& text);
std::size_t listBytes(std::size_t items);
std::size_t recordBytes(const std::vector<std::pair<std::string, Value>>& fields);

}  // namespace meshflow::interp
