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

/// Why writing the file `path` failed or would fail, for the message after
/// `cannot write '...': ` (its folder does not exist, it is a folder, no permission).
std::string whyCannotWrite(const std::filesystem::path& path);

/// Why files cannot be created under the folder `folder` (created first if
/// missing), or empty if they can: the nearest part of it that exists must be
/// a folder this process may write in.
std::string whyCannotWriteUnder(const std::filesystem::path& folder);

}  // namespace meshflow::interp
