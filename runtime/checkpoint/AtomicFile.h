// Durable file-system steps: a file is on disk once fsync returns, and a rename
// or a new directory entry once its directory has been fsync'ed too. Failures throw
// std::filesystem::filesystem_error naming the path.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace meshflow::runtime::checkpoint {

/// Creates (or truncates) `file`, writes `bytes` and fsyncs it. The directory entry
/// is durable only once the caller syncs the directory.
void writeFileDurably(const std::filesystem::path& file, std::span<const std::uint8_t> bytes);
void writeFileDurably(const std::filesystem::path& file, std::string_view text);

/// fsyncs a directory, making the entries created, renamed or removed in it durable.
void syncDirectory(const std::filesystem::path& directory);

/// Renames `from` to `to` (both in `directory`) and syncs `directory`.
void renameDurably(const std::filesystem::path& from, const std::filesystem::path& to,
                   const std::filesystem::path& directory);

/// Replaces `file` with one holding `text`, atomically: readers see the old contents
/// or the new, never a mix, even after a crash. Goes through `temporary`, a path in
/// the same directory.
void replaceFileDurably(const std::filesystem::path& file, std::string_view text,
                        const std::filesystem::path& temporary);

/// The whole contents of `file`.
std::vector<std::uint8_t> readWholeFile(const std::filesystem::path& file);

}  // namespace meshflow::runtime::checkpoint
