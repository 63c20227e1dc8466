#include "interp/FileAccess.h"

#include <fmt/format.h>

#include <algorithm>

namespace meshflow::interp {
namespace {

namespace fs = std::filesystem;

bool isUnder(const fs::path& path, const fs::path& root) {
  auto [rootEnd, pathIt] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
  // `root` ends with an empty element when written with a trailing slash.
  return rootEnd == root.end() || (std::next(rootEnd) == root.end() && rootEnd->empty());
}

bool underAny(const fs::path& path, const std::vector<std::string>& roots) {
  return std::any_of(roots.begin(), roots.end(), [&](const std::string& root) {
    return isUnder(path, normalisePath(root, fs::current_path()));
  });
}

}  // namespace

fs::path normalisePath(const fs::path& path, const fs::path& base) {
  fs::path absolute = path.is_absolute() ? path : base / path;
  std::error_code ignored;
  // weakly_canonical resolves symlinks of the part that exists, so a link
  // cannot smuggle a path out of an allowed folder.
  fs::path canonical = fs::weakly_canonical(absolute, ignored);
  return (canonical.empty() ? absolute : canonical).lexically_normal();
}

fs::path checkRead(const Config& config, const fs::path& path) {
  fs::path normal = normalisePath(path, fs::current_path());
  std::vector<std::string> roots = config.files.readRoots;
  roots.insert(roots.end(), config.importRoots.begin(), config.importRoots.end());
  if (!config.stdlibDir.empty()) roots.push_back(config.stdlibDir);
  if (underAny(normal, roots)) return normal;
  throw ScriptError(DiagnosticKind::AccessDenied,
                    fmt::format("reading '{}' is not allowed: it is outside the folders this "
                                "script may read (allow it with --allow-read {})",
                                normal.string(), normal.parent_path().string()));
}

fs::path checkWrite(const Config& config, const fs::path& path) {
  fs::path normal = normalisePath(path, fs::current_path());
  if (underAny(normal, config.files.writeRoots)) return normal;
  throw ScriptError(DiagnosticKind::AccessDenied,
                    fmt::format("writing '{}' is not allowed: it is outside the folders this "
                                "script may write (allow it with --allow-write {})",
                                normal.string(), normal.parent_path().string()));
}

}  // namespace meshflow::interp
