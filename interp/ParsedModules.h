// Syntax trees of imported modules, shared between interpreters (Config::parsedModules).
// A parsed program is immutable, so one parse can serve any number of
// interpreters; what a module's code does when it runs stays each interpreter's own.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "interp/Ast.h"

namespace meshflow::interp {

class ParsedModules {
 public:
  /// The program parsed earlier from exactly `text` at `path`, or null.
  std::shared_ptr<const ast::Program> find(const std::string& path, const std::string& text);
  /// Keeps `program`, the parse of `text` at `path` (replacing an older text's).
  void remember(const std::string& path, const std::string& text,
                std::shared_ptr<const ast::Program> program);
  /// Drops the parse kept for `path`, if any.
  void forget(const std::string& path);

 private:
  struct Entry {
    std::string text;
    std::shared_ptr<const ast::Program> program;
  };
  // Interpreters on different threads may share one instance.
  std::mutex mutex_;
  std::map<std::string, Entry> byPath_;
};

}  // namespace meshflow::interp
