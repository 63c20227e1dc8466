// Which files a script may touch. Scripts are hermetic: only the stdlib, the
// import roots and the folders the host allows can be read, and only the
// allowed write folders written.
#pragma once

#include <filesystem>
#include <string>

#include "meshflow/meshflow.h"

namespace meshflow::interp {

/// The absolute, normalised form of `path` (relative paths against `base`).
std::filesystem::path normalisePath(const std::filesystem::path& path,
                                    const std::filesystem::path& base);

/// Returns the normalised path if `config` allows reading it; otherwise throws
/// an AccessDenied ScriptError naming the path and the flag that would allow it.
std::filesystem::path checkRead(const Config& config, const std::filesystem::path& path);
std::filesystem::path checkWrite(const Config& config, const std::filesystem::path& path);

}  // namespace meshflow::interp
