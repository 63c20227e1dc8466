#include "tests/fuzz/CheckpointBundle.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint/CheckpointFormat.h"

namespace meshflow::fuzz {
namespace {

using runtime::checkpoint::checksumText;
using runtime::checkpoint::fnv1a64;

void repairTrailer(std::string& shard) {
  constexpr std::size_t kTrailer = 8;
  if (shard.size() < kTrailer) return;
  const std::uint64_t checksum = fnv1a64(std::string_view(shard).substr(0, shard.size() - kTrailer));
  for (std::size_t i = 0; i < kTrailer; ++i)
    shard[shard.size() - kTrailer + i] = static_cast<char>(checksum >> (8 * i));
}

// Each listed file that the bundle holds gets its true size and checksum, then
// the text its own checksum (as CheckpointMeta.cpp computes it).
void repairMeta(std::string& meta, const std::vector<std::string>& shards) {
  nlohmann::json json = nlohmann::json::parse(meta, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return;
  if (auto files = json.find("files"); files != json.end() && files->is_array())
    for (auto& file : *files)
      if (file.is_object() && file.contains("name") && file["name"].is_string())
        for (std::size_t i = 0; i < shards.size(); ++i)
          if (file["name"] == CheckpointBundle::shardName(i)) {
            file["bytes"] = shards[i].size();
            file["fnv1a64"] = checksumText(fnv1a64(shards[i]));
          }
  json.erase("checksum");
  json["checksum"] = checksumText(fnv1a64(json.dump()));
  meta = json.dump(2);
}

}  // namespace

CheckpointBundle CheckpointBundle::decode(const std::uint8_t* data, std::size_t size) {
  CheckpointBundle bundle;
  if (size == 0) return bundle;
  bundle.flags = data[0];
  std::vector<std::string> sections;
  std::size_t at = 1;
  while (at < size && sections.size() < 2 + kMaxShards) {
    std::uint32_t length = 0;
    for (int i = 0; i < 4 && at < size; ++i, ++at) length |= std::uint32_t{data[at]} << (8 * i);
    const std::size_t taken = std::min<std::size_t>(length, size - at);
    sections.emplace_back(reinterpret_cast<const char*>(data + at), taken);
    at += taken;
  }
  if (!sections.empty()) bundle.latest = sections[0];
  if (sections.size() > 1) bundle.meta = sections[1];
  for (std::size_t i = 2; i < sections.size(); ++i) bundle.shards.push_back(sections[i]);
  return bundle;
}

std::string CheckpointBundle::encode() const {
  std::string out(1, static_cast<char>(flags));
  auto section = [&out](const std::string& bytes) {
    const auto length = static_cast<std::uint32_t>(bytes.size());
    for (int i = 0; i < 4; ++i) out += static_cast<char>(length >> (8 * i));
    out += bytes;
  };
  section(latest);
  section(meta);
  for (const std::string& shard : shards) section(shard);
  return out;
}

void CheckpointBundle::repair() {
  if (flags & kRepairShards)
    for (std::string& shard : shards) repairTrailer(shard);
  if (flags & kRepairMeta) repairMeta(meta, shards);
}

std::string CheckpointBundle::shardName(std::size_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "device-%04zu.bin", index);
  return name;
}

}  // namespace meshflow::fuzz
