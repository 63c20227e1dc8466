// meta.json: what a checkpoint holds, read before any shard file. Its text carries
// an FNV-1a 64 checksum of itself (of its compact dump without the checksum field),
// so that a bit flip in `info` is caught as surely as one in a shard file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/Tensor.h"

namespace meshflow::runtime::checkpoint {

constexpr int kMetaFormatVersion = 1;

/// A tensor of the table: what its pieces must assemble to.
struct TensorEntry {
  ir::DType dtype = ir::DType::F32;
  Shape shape;
};

/// A shard file: its name in the step directory, size and checksumText.
struct FileEntry {
  std::string name;
  std::uint64_t bytes = 0;
  std::string checksum;
};

struct CheckpointMeta {
  std::int64_t step = 0;
  nlohmann::json info;
  std::map<std::string, TensorEntry> tensors;
  std::vector<FileEntry> files;
};

/// meta.json's text, indented, with its checksum.
std::string metaText(const CheckpointMeta& meta);

/// Parses meta.json's text; throws CheckpointError naming `file` when it is not
/// JSON, fails its checksum, has another format version, or lacks a field.
CheckpointMeta parseMeta(std::string_view text, const std::filesystem::path& file);

}  // namespace meshflow::runtime::checkpoint
