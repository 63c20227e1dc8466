// readLatestCheckpoint: follow `latest`, verify meta.json, verify and decode every
// shard file it lists, assemble the whole tensors. Nothing unverified is trusted:
// each step names the file it found wanting.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <map>
#include <set>

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

/// A decoded shard file.
struct LoadedShard {
  fs::path file;
  std::vector<ShardPiece> pieces;
};

/// Where the step directory is and which step it claims to hold.
struct Pointer {
  fs::path stepDirectory;
  std::int64_t step = 0;
};

// At most the first 40 bytes, unprintable ones escaped, for a message about garbage.
std::string shownText(const std::string& text) {
  std::string shown;
  for (unsigned char c : text.substr(0, 40))
    shown += std::isprint(c) ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
  return "\"" + shown + (text.size() > 40 ? "...\"" : "\"");
}

Pointer readPointer(const fs::path& dir) {
  const fs::path latest = dir / kLatestFile;
  if (!fs::is_regular_file(latest)) throw CheckpointError(latest, "not a regular file");
  const auto bytes = readWholeFile(latest);
  std::string text(bytes.begin(), bytes.end());
  const std::string line = text.ends_with('\n') ? text.substr(0, text.size() - 1) : text;
  const auto step = parseStepDirectoryName(line);
  if (!step)
    throw CheckpointError(
        latest,
        "not a checkpoint pointer: expected one line step-<digits>, found " + shownText(text));
  if (!fs::is_directory(dir / line))
    throw CheckpointError(
        latest, fmt::format("names {}, which is not a directory in {}", line, dir.string()));
  return {dir / line, *step};
}

CheckpointMeta readMeta(const Pointer& pointer) {
  const fs::path file = pointer.stepDirectory / kMetaFile;
  if (!fs::exists(file)) throw CheckpointError(file, "missing");
  const auto bytes = readWholeFile(file);
  CheckpointMeta meta = parseMeta(std::string(bytes.begin(), bytes.end()), file);
  if (meta.step != pointer.step)
    throw CheckpointError(file, fmt::format("holds step {}, but its directory is {}", meta.step,
                                            pointer.stepDirectory.filename().string()));
  return meta;
}

LoadedShard readShard(const fs::path& stepDirectory, const FileEntry& entry) {
  const fs::path file = stepDirectory / entry.name;
  if (!fs::exists(file)) throw CheckpointError(file, "missing (meta.json lists it)");
  const auto bytes = readWholeFile(file);
  if (bytes.size() != entry.bytes)
    throw CheckpointError(file, fmt::format("{} bytes, but meta.json says {} (truncated or "
                                            "overwritten)",
                                            bytes.size(), entry.bytes));
  const std::string checksum = checksumText(fnv1a64(bytes));
  if (checksum != entry.checksum)
    throw CheckpointError(file, fmt::format("checksum mismatch: the contents hash to {}, "
                                            "meta.json says {} (corrupted)",
                                            checksum, entry.checksum));
  return {file, decodeShard(bytes, file)};
}

std::map<std::string, std::vector<SourcedPiece>> piecesByTensor(
    const CheckpointMeta& meta, const std::vector<LoadedShard>& shards) {
  std::map<std::string, std::vector<SourcedPiece>> byTensor;
  for (const LoadedShard& shard : shards)
    for (const ShardPiece& piece : shard.pieces) {
      if (!meta.tensors.contains(piece.name))
        throw CheckpointError(shard.file, "not in meta.json's tensor table", piece.name);
      byTensor[piece.name].push_back({&piece, shard.file.filename().string()});
    }
  return byTensor;
}

std::string sourceList(const std::vector<SourcedPiece>& pieces) {
  std::set<std::string> sources;
  for (const SourcedPiece& piece : pieces) sources.insert(piece.source);
  return fmt::format("{}", fmt::join(sources, ", "));
}

// A fault in one piece names its shard file; a gap, which no piece is to blame
// for, names meta.json (whose table declares the tensor) and lists the files.
Tensor assemble(const std::string& name, const TensorEntry& entry,
                const std::vector<SourcedPiece>& pieces, const fs::path& stepDirectory) {
  try {
    return assembleTensor(entry.dtype, entry.shape, pieces);
  } catch (const AssemblyError& e) {
    if (!e.source().empty()) throw CheckpointError(stepDirectory / e.source(), e.what(), name);
    throw CheckpointError(stepDirectory / kMetaFile,
                          fmt::format("{} (pieces in {})", e.what(), sourceList(pieces)), name);
  }
}

TensorMap assembleAll(const CheckpointMeta& meta, const std::vector<LoadedShard>& shards,
                      const fs::path& stepDirectory) {
  const auto byTensor = piecesByTensor(meta, shards);
  TensorMap tensors;
  for (const auto& [name, entry] : meta.tensors) {
    auto pieces = byTensor.find(name);
    if (pieces == byTensor.end())
      throw CheckpointError(stepDirectory / kMetaFile, "no shard file holds a piece of it", name);
    tensors[name] = assemble(name, entry, pieces->second, stepDirectory);
  }
  return tensors;
}

}  // namespace

std::optional<LoadedCheckpoint> readLatestCheckpoint(const fs::path& dir) {
  if (!fs::exists(dir / kLatestFile)) return std::nullopt;
  const Pointer pointer = readPointer(dir);
  CheckpointMeta meta = readMeta(pointer);
  std::vector<LoadedShard> shards;
  for (const FileEntry& entry : meta.files)
    shards.push_back(readShard(pointer.stepDirectory, entry));
  LoadedCheckpoint loaded;
  loaded.step = meta.step;
  loaded.info = std::move(meta.info);
  loaded.tensors = assembleAll(meta, shards, pointer.stepDirectory);
  loaded.path = pointer.stepDirectory;
  return loaded;
}

}  // namespace meshflow::runtime
