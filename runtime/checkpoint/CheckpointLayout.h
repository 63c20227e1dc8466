// The names inside a checkpoint directory (the layout is in Checkpoint.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace meshflow::runtime::checkpoint {

constexpr std::string_view kLatestFile = "latest";
constexpr std::string_view kMetaFile = "meta.json";
/// Every temporary, of a step directory or of the `latest` pointer, starts so;
/// readers never look at one and writers remove stale ones.
constexpr std::string_view kTemporaryPrefix = ".tmp-";

/// "step-00000010".
std::string stepDirectoryName(std::int64_t step);
/// The step of a step directory's name; std::nullopt for any other name.
std::optional<std::int64_t> parseStepDirectoryName(std::string_view name);

/// "device-0003.bin".
std::string shardFileName(int device);
/// Whether `name` is a shard file's name, so that a file list read from meta.json
/// cannot lead the reader outside the step directory.
bool isShardFileName(std::string_view name);

/// A temporary name for the step directory of `step`, unique to this write.
std::string temporaryDirectoryName(std::int64_t step);
/// The temporary the `latest` pointer is replaced through.
std::string temporaryLatestName();

}  // namespace meshflow::runtime::checkpoint
