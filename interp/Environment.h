// Lexical scopes.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "interp/SourceFile.h"
#include "meshflow/Value.h"

namespace meshflow::interp {

struct Binding {
  Value value;
  bool isMutable = false;
  SourceSpan definedAt;  // invalid for builtins and host definitions
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
