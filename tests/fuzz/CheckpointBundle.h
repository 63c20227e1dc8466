// The input of fuzz_checkpoint: a whole checkpoint directory in one byte string.
//
//   flags  1 byte   bit 0: rewrite each shard file's trailer checksum;
//                   bit 1: rewrite meta.json's file sizes and checksums and its
//                   own checksum, so that mutations reach the parsers behind them
//   then sections, each a u32 little-endian length and that many bytes:
//   `latest`, meta.json, device-0000.bin, device-0001.bin, ... (the last
//   section may be cut short: it takes what is left)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace meshflow::fuzz {

struct CheckpointBundle {
  static constexpr std::uint8_t kRepairShards = 1;
  static constexpr std::uint8_t kRepairMeta = 2;
  static constexpr std::size_t kMaxShards = 8;

  std::uint8_t flags = kRepairShards | kRepairMeta;
  std::string latest;
  std::string meta;
  std::vector<std::string> shards;

  static CheckpointBundle decode(const std::uint8_t* data, std::size_t size);
  std::string encode() const;
  /// The checksums the flags ask for, made right.
  void repair();
  /// The file name of shard section `index`: device-0000.bin, ...
  static std::string shardName(std::size_t index);
};

}  // namespace meshflow::fuzz
