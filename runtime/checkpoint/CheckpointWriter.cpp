// writeCheckpoint: check the shards, write them to a temporary directory, rename it
// into place, move `latest`, prune. Every step is durable before the next begins,
// so a crash anywhere leaves `latest` naming a complete checkpoint.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointFormat.h"
#include "runtime/checkpoint/CheckpointLayout.h"
#include "runtime/checkpoint/CheckpointMeta.h"
#include "runtime/checkpoint/TensorAssembly.h"

namespace meshflow::runtime {
namespace {

namespace fs = std::filesystem;
using namespace checkpoint;

/// The pieces one device stores once replicated copies are dropped.
struct StoredShard {
  int device = 0;
  std::vector<const ShardPiece*> pieces;
};

[[noreturn]] void refuse(const std::string& message) {
  throw std::invalid_argument("writeCheckpoint: " + message);
}

void validateArguments(std::int64_t step, const nlohmann::json& info,
                       const std::vector<DeviceShard>& shards, int keep) {
  if (step < 0) refuse(fmt::format("step {} is negative", step));
  if (keep < 1)
    refuse(fmt::format("keep is {}; it counts the new checkpoint, so at least 1", keep));
  std::set<int> devices;
  for (const DeviceShard& shard : shards)
    if (shard.device < 0 || !devices.insert(shard.device).second)
      refuse(fmt::format("device {} is negative or holds two shards", shard.device));
  // meta.json is written last; a value that cannot be dumped (a string that is not
  // UTF-8) must fail before anything else is.
  try {
    (void)info.dump();
  } catch (const nlohmann::json::type_error& e) {
    refuse(fmt::format("info cannot be written as JSON ({})", e.what()));
  }
}

// A replicated piece (same name, offset and bits) is stored by the first device
// holding it. Copies that differ are all kept, for checkAssembly to report.
std::vector<StoredShard> dropReplicas(const std::vector<DeviceShard>& shards) {
  // A flat piece's key also has its run's start (-1 for a block).
  using Key = std::tuple<std::string, std::vector<std::int64_t>, Shape, std::int64_t>;
  std::map<Key, std::vector<const ShardPiece*>> copies;
  std::vector<StoredShard> stored;
  for (const DeviceShard& shard : shards) {
    StoredShard& out = stored.emplace_back(StoredShard{shard.device, {}});
    for (const ShardPiece& piece : shard.pieces) {
      auto& same = copies[Key{piece.name, piece.offset, piece.tensor.shape(), piece.flat ? piece.flat->begin : -1}];
      auto equal = [&](const ShardPiece* other) { return other->tensor.bitEqual(piece.tensor); };
      if (std::any_of(same.begin(), same.end(), equal)) continue;
      same.push_back(&piece);
      out.pieces.push_back(&piece);
    }
  }
  return stored;
}

std::map<std::string, std::vector<SourcedPiece>> piecesByTensor(
    const std::vector<StoredShard>& shards) {
  std::map<std::string, std::vector<SourcedPiece>> byTensor;
  for (const StoredShard& shard : shards)
    for (const ShardPiece* piece : shard.pieces)
      byTensor[piece->name].push_back({piece, fmt::format("device {}", shard.device)});
  return byTensor;
}

// Refuses shards whose checkpoint could not be read back, before anything is
// written, and returns the tensor table. One tensor is assembled at a time, so at
// most the largest is held twice.
std::map<std::string, TensorEntry> checkAssembly(const std::vector<StoredShard>& shards) {
  std::map<std::string, TensorEntry> table;
  for (const auto& [name, pieces] : piecesByTensor(shards)) {
    const ShardPiece& first = *pieces.front().piece;
    TensorEntry entry{first.tensor.dtype(), first.globalShape};
    try {
      assembleTensor(entry.dtype, entry.shape, pieces);
    } catch (const AssemblyError& e) {
      const std::string source = e.source().empty() ? "" : e.source() + ": ";
      refuse(fmt::format("tensor '{}': {}{}", name, source, e.what()));
    }
    table[name] = std::move(entry);
  }
  return table;
}

// A new `dir` is durable once its parent is synced ("ckpt/" names "ckpt" too).
void prepareDirectory(const fs::path& dir) {
  if (!fs::create_directories(dir)) return;
  const fs::path named = dir.has_filename() ? dir : dir.parent_path();
  syncDirectory(named.parent_path());
}

// A step directory is never overwritten in place: while it is being replaced no
// complete checkpoint would be the latest.
void refuseRewritingLatest(const fs::path& dir, std::int64_t step) {
  const fs::path latest = dir / kLatestFile;
  if (!fs::exists(latest)) return;
  const auto bytes = readWholeFile(latest);
  const std::string pointer(bytes.begin(), bytes.end());
  if (pointer == stepDirectoryName(step) + "\n")
    refuse(fmt::format("step {} is already the latest checkpoint in {}", step, dir.string()));
}

void stage(const CheckpointWriteOptions& options, std::string_view name) {
  if (options.beforeStage) options.beforeStage(name);
}

// Writes the shard files and then meta.json, which lists their sizes and checksums.
void writeFiles(const fs::path& temp, CheckpointMeta meta, const std::vector<StoredShard>& shards,
                const CheckpointWriteOptions& options) {
  for (const StoredShard& shard : shards) {
    const std::string name = shardFileName(shard.device);
    stage(options, name);
    const Bytes bytes = encodeShard(shard.pieces);
    writeFileDurably(temp / name, bytes);
    meta.files.push_back({name, bytes.size(), checksumText(fnv1a64(bytes))});
  }
  stage(options, kMetaFile);
  writeFileDurably(temp / kMetaFile, metaText(meta));
  syncDirectory(temp);
}

// A step directory that is already there is not the latest (refuseRewritingLatest):
// a write died between renaming it into place and moving `latest`, and this write
// replaces it.
void moveIntoPlace(const fs::path& temp, const fs::path& final, const fs::path& dir) {
  if (fs::exists(final)) fs::remove_all(final);
  renameDurably(temp, final, dir);
}

void writeStepDirectory(const fs::path& dir, const CheckpointMeta& meta,
                        const std::vector<StoredShard>& shards,
                        const CheckpointWriteOptions& options) {
  const fs::path temp = dir / temporaryDirectoryName(meta.step);
  fs::create_directory(temp);
  try {
    writeFiles(temp, meta, shards, options);
    stage(options, "rename");
    moveIntoPlace(temp, dir / stepDirectoryName(meta.step), dir);
  } catch (...) {
    // A crash would leave the temporary behind for the next write to prune; an
    // exception can clean up at once.
    std::error_code ignored;
    fs::remove_all(temp, ignored);
    throw;
  }
}

// Removes the step directories below `step` beyond the keep - 1 newest, and every
// temporary: one run writes to a directory at a time, so a temporary that is not
// this write's is a dead write's. Step directories above `step` are left alone:
// they are from a run this one resumed behind, and each is replaced when this run
// reaches its step. Removal is best effort; the next write tries again.
void prune(const fs::path& dir, std::int64_t step, int keep) {
  std::error_code error;
  std::vector<fs::path> doomed;
  std::vector<std::pair<std::int64_t, fs::path>> older;
  for (auto it = fs::directory_iterator(dir, error); !error && it != fs::directory_iterator();
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.starts_with(kTemporaryPrefix)) doomed.push_back(it->path());
    if (auto s = parseStepDirectoryName(name); s && *s < step) older.emplace_back(*s, it->path());
  }
  std::sort(older.rbegin(), older.rend());
  for (std::size_t i = static_cast<std::size_t>(keep - 1); i < older.size(); ++i)
    doomed.push_back(older[i].second);
  for (const fs::path& path : doomed) fs::remove_all(path, error);
}

}  // namespace

DeviceShard wholeTensorShard(int device, const TensorMap& tensors) {
  DeviceShard shard{device, {}};
  for (const auto& [name, tensor] : tensors)
    shard.pieces.push_back({name, tensor.shape(), std::vector<std::int64_t>(tensor.rank(), 0), tensor});
  return shard;
}

void writeCheckpoint(const fs::path& dir, std::int64_t step, const nlohmann::json& info,
                     const std::vector<DeviceShard>& shards,
                     const CheckpointWriteOptions& options) {
  validateArguments(step, info, shards, options.keep);
  const std::vector<StoredShard> stored = dropReplicas(shards);
  CheckpointMeta meta{step, info, checkAssembly(stored), {}};
  prepareDirectory(dir);
  refuseRewritingLatest(dir, step);
  writeStepDirectory(dir, meta, stored, options);
  stage(options, "latest");
  replaceFileDurably(dir / kLatestFile, stepDirectoryName(step) + "\n",
                     dir / temporaryLatestName());
  stage(options, "prune");
  prune(dir, step, options.keep);
}

fs::path beginCheckpoint(const fs::path& dir, std::int64_t step, const nlohmann::json& info, int keep) {
  validateArguments(step, info, {}, keep);
  prepareDirectory(dir);
  refuseRewritingLatest(dir, step);
  const fs::path temp = dir / temporaryDirectoryName(step);
  fs::create_directory(temp);
  return temp;
}

WrittenShardFile writeShardFile(const fs::path& temp, const DeviceShard& shard) {
  std::vector<const ShardPiece*> pieces;
  WrittenShardFile written{shardFileName(shard.device), 0, {}, {}};
  for (const ShardPiece& piece : shard.pieces) {
    pieces.push_back(&piece);
    written.tensors.emplace(piece.name, std::pair{piece.tensor.dtype(), piece.globalShape});
  }
  const Bytes bytes = encodeShard(pieces);
  writeFileDurably(temp / written.name, bytes);
  written.bytes = bytes.size();
  written.checksum = checksumText(fnv1a64(bytes));
  return written;
}

void commitCheckpoint(const fs::path& dir, const fs::path& temp, std::int64_t step, const nlohmann::json& info,
                      const std::vector<WrittenShardFile>& files, int keep) {
  CheckpointMeta meta{step, info, {}, {}};
  for (const WrittenShardFile& file : files) {
    for (const auto& [name, type] : file.tensors) {
      auto [it, added] = meta.tensors.emplace(name, TensorEntry{type.first, type.second});
      if (!added && (it->second.dtype != type.first || it->second.shape != type.second))
        refuse(fmt::format("tensor '{}' has another dtype or shape in {}", name, file.name));
    }
    meta.files.push_back({file.name, file.bytes, file.checksum});
  }
  writeFileDurably(temp / kMetaFile, metaText(meta));
  syncDirectory(temp);
  moveIntoPlace(temp, dir / stepDirectoryName(step), dir);
  replaceFileDurably(dir / kLatestFile, stepDirectoryName(step) + "\n", dir / temporaryLatestName());
  prune(dir, step, keep);
}

void abandonCheckpoint(const fs::path& temp) {
  std::error_code ignored;
  fs::remove_all(temp, ignored);
}

void writeCheckpoint(const fs::path& dir, std::int64_t step, const nlohmann::json& info,
                     const std::vector<DeviceShard>& shards, int keep) {
  writeCheckpoint(dir, step, info, shards, CheckpointWriteOptions{keep, {}});
}

}  // namespace meshflow::runtime
