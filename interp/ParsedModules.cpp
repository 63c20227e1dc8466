#include "interp/ParsedModules.h"

namespace meshflow::interp {

std::shared_ptr<const ast::Program> ParsedModules::find(const std::string& path,
                                                        const std::string& text) {
  std::lock_guard lock(mutex_);
  auto it = byPath_.find(path);
  // The text, not a timestamp, decides: a module edited since is parsed again.
  if (it == byPath_.end() || it->second.text != text) return nullptr;
  return it->second.program;
}

void ParsedModules::remember(const std::string& path, const std::string& text,
                             std::shared_ptr<const ast::Program> program) {
  std::lock_guard lock(mutex_);
  byPath_[path] = Entry{text, std::move(program)};
}

void ParsedModules::forget(const std::string& path) {
  std::lock_guard lock(mutex_);
  byPath_.erase(path);
}

}  // namespace meshflow::interp
