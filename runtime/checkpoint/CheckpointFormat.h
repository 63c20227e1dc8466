// The binary encoding of one shard file (the layout is in Checkpoint.h) and the
// FNV-1a 64 checksum that protects shard files and meta.json.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/checkpoint/Checkpoint.h"

namespace meshflow::runtime::checkpoint {

using Bytes = std::vector<std::uint8_t>;

/// The newest shard format: version 2 adds flat pieces. The writer writes
/// version 1 when no piece is flat; the reader reads both.
constexpr std::uint32_t kShardFormatVersion = 2;

std::uint64_t fnv1a64(std::span<const std::uint8_t> bytes);
std::uint64_t fnv1a64(std::string_view text);
/// 16 lower-case hex digits.
std::string checksumText(std::uint64_t checksum);

/// The shard file holding `pieces`, in their order.
Bytes encodeShard(const std::vector<const ShardPiece*>& pieces);

/// The pieces of a shard file; throws CheckpointError naming `file` when the bytes
/// are truncated, fail the trailer checksum, or do not parse.
std::vector<ShardPiece> decodeShard(std::span<const std::uint8_t> bytes,
                                    const std::filesystem::path& file);

}  // namespace meshflow::runtime::checkpoint
