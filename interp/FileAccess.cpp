#include "interp/FileAccess.h"

#include <fmt/format.h>
#include <unistd.h>

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

bool writable(const fs::path& path) { return ::access(path.c_str(), W_OK) == 0; }

}  // namespace

std::string whyCannotWrite(const fs::path& path) {
  std::error_code error;
  if (fs::is_directory(path, error)) return "it is a folder";
  fs::path folder = path.parent_path();
  if (!folder.empty()) {
    if (!fs::exists(folder, error))
      return fmt::format("the folder '{}' does not exist", folder.string());
    if (!fs::is_directory(folder, error))
      return fmt::format("'{}' is a file, not a folder", folder.string());
    if (!writable(folder)) return fmt::format("no permission to write in '{}'", folder.string());
  }
  if (fs::exists(path, error) && !writable(path)) return "no permission to write it";
  return "the write failed (is the disk full?)";
}

std::string whyCannotWriteUnder(const fs::path& folder) {
  std::error_code error;
  fs::path existing = folder;
  while (!existing.empty() && !fs::exists(existing, error) && existing != existing.root_path())
    existing = existing.parent_path();
  if (existing.empty()) return "";
  if (!fs::is_directory(existing, error))
    return fmt::format("'{}' is a file, not a folder", existing.string());
  if (!writable(existing)) return fmt::format("no permission to write in '{}'", existing.string());
  return "";
}

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
