// Lexical scopes.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "interp/SourceFile.h"
#include "meshflow/Value.h"

namespace meshflow::interp {

/// The module a name was defined in, when it reached a scope by `import`: the
/// same definition reached through two imports is one definition, not a clash.
/// Each loaded module has one ImportOrigin; bindings share it by pointer.
struct ImportOrigin {
  std::string key;   // the module's normalised path
  std::string name;  // as the import named it: `std.layers`, `blocks`
};

struct Binding {
  Binding() = default;
  Binding(Value value, bool isMutable, SourceSpan definedAt,
          std::shared_ptr<const ImportOrigin> origin = nullptr)
      : value(std::move(value)),
        isMutable(isMutable),
        definedAt(definedAt),
        origin(std::move(origin)) {}

  Value value;
  bool isMutable = false;
  SourceSpan definedAt;  // invalid for builtins and host definitions
  std::shared_ptr<const ImportOrigin> origin;  // set for names brought in by `import`
};

class Environment {
 public:
  explicit Environment(std::shared_ptr<Environment> parent = nullptr) : parent_(std::move(parent)) {}
  ~Environment();

  /// The binding of `name` here or in an enclosing scope.
  Binding* find(const std::string& name);
  Binding* findLocal(const std::string& name);
  /// Defines `name` in this scope; false (and no change) if it is already defined here.
  bool define(const std::string& name, Binding binding);
  /// Names visible from this scope, sorted and unique.
  std::vector<std::string> visibleNames() const;
  /// Names defined in this scope itself, sorted.
  std::vector<std::string> localNames() const;
  const std::shared_ptr<Environment>& parent() const { return parent_; }
  /// Drops every binding (breaking cycles through closures).
  void clear();

 private:
  std::shared_ptr<Environment> parent_;
  std::unordered_map<std::string, Binding> bindings_;
};

}  // namespace meshflow::interp
