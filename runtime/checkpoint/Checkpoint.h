// Sharded, atomic training checkpoints. Every device of a parallel run holds some
// tensors of the training state, whole or as a block of a larger tensor; a
// checkpoint stores those pieces and is read back as whole tensors by name, so a
// resumed run may use a different plan and device count (docs/checkpoints.md).
//
// Layout of a checkpoint directory `dir`:
//
//   dir/latest                  "step-00000020\n": the newest complete checkpoint
//   dir/step-00000010/          an older checkpoint, kept while `keep` allows
//   dir/step-00000020/
//     meta.json                 format version, step, the caller's `info`, the
//                               tensor table (dtype, global shape) and the file
//                               list (name, size, FNV-1a 64 checksum); the JSON
//                               carries a checksum of itself
//     device-0000.bin ...       one shard file per device
//   dir/.tmp-...                the temporary of a write in progress (or of one
//                               that died); never read
//
// A shard file is little-endian:
//
//   magic     8 bytes  "MFCKPT\r\n"
//   version   u32      1, or 2 when a piece is flat
//   pieces    u32      the number of pieces
//   per piece:
//     name    u32 length, then that many bytes of UTF-8
//     dtype   u8       1 = f32, 2 = i32, 3 = f16, 4 = bf16 (2-byte elements)
//     rank    u32
//     global shape, offset, local shape: rank i64 each
//     (version 2 only) kind u8: 0 = a block, 1 = flat, then for flat: begin i64,
//                      count i64 (the local shape is then the block's)
//     payload          the local block's elements, row-major, 4 bytes each
//                      (a flat piece's count elements)
//   trailer   u64      FNV-1a 64 of every byte before it
//
// so a truncated or bit-flipped file fails its checksum before it is parsed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::runtime {

/// A corrupt, truncated, missing or inconsistent checkpoint. what() is
/// "FILE: MESSAGE", or "FILE: tensor 'NAME': MESSAGE" when it is about one tensor.
class CheckpointError : public std::runtime_error {
 public:
  CheckpointError(const std::filesystem::path& file, const std::string& detail,
                  const std::string& tensor = {});

  const std::filesystem::path& file() const { return file_; }
  /// The tensor the error is about; empty when it is about the file as a whole.
  const std::string& tensor() const { return tensor_; }
  /// The message without the file and tensor prefix.
  const std::string& detail() const { return detail_; }

 private:
  std::filesystem::path file_;
  std::string tensor_;
  std::string detail_;
};

/// Where a flat piece's elements lie: a run of the row-major elements of the
/// block of shape `block` (at the piece's offset), from element `begin` on.
struct FlatRange {
  Shape block;
  std::int64_t begin = 0;
};

/// One tensor piece a device holds: `tensor` is the block of the whole tensor `name`
/// (shape `globalShape`) starting at `offset` (one entry per dimension). A whole
/// tensor has offset all zeros and tensor.shape() == globalShape.
///
/// A flat piece (`flat` set) is a run of a block's elements instead — a sharded
/// optimizer's shard of a flattened block (docs/runtime.md), which no block can
/// express: `tensor` is 1-D and holds elements [flat->begin, flat->begin +
/// tensor.elements()) of the block.
struct ShardPiece {
  std::string name;
  Shape globalShape;
  std::vector<std::int64_t> offset;
  Tensor tensor;
  std::optional<FlatRange> flat = std::nullopt;
};

/// The pieces one device holds.
struct DeviceShard {
  int device = 0;
  std::vector<ShardPiece> pieces;
};

/// The shard of a device that holds whole tensors (unsharded or replicated
/// state): one piece per tensor, at offset zero.
DeviceShard wholeTensorShard(int device, const TensorMap& tensors);

struct CheckpointWriteOptions {
  /// How many checkpoints to keep: the new one and the keep - 1 newest older ones.
  int keep = 2;
  /// Called before each stage of the write with its name: every shard file
  /// ("device-0003.bin"), "meta.json", "rename" (the temporary directory becomes
  /// the step directory), "latest" (the pointer moves) and "prune". Tests throw
  /// from it to stand for a crash at that point.
  std::function<void(std::string_view stage)> beforeStage;
};

/// Writes step `step` to dir/step-NNNNNNNN/ with `info` (plan summary, seed,
/// optimizer, data position: whatever the caller needs to resume) stored in
/// meta.json. Atomic: the files go to a temporary directory in `dir`, each is
/// fsync'ed, the directory is renamed to its final name and `dir` fsync'ed, and only
/// then is `latest` replaced (temporary file, fsync, rename). A crash at any point
/// leaves the previous checkpoint the latest. Replicated pieces (same name, offset
/// and bits) are stored once. After the pointer moves, older checkpoints beyond
/// `keep` and stale temporaries are removed (best effort: what cannot be removed
/// now is retried by the next write).
///
/// Throws std::invalid_argument, before anything is written, when the shards could
/// not be read back: a negative step, keep < 1, a duplicate device, pieces of one
/// tensor that disagree on dtype or global shape, lie outside it, leave a gap or
/// overlap with different bits; or when `step` is already the latest checkpoint
/// (a checkpoint is never overwritten in place). I/O failures throw
/// std::filesystem::filesystem_error naming the path.
void writeCheckpoint(const std::filesystem::path& dir, std::int64_t step,
                     const nlohmann::json& info, const std::vector<DeviceShard>& shards,
                     const CheckpointWriteOptions& options);
void writeCheckpoint(const std::filesystem::path& dir, std::int64_t step,
                     const nlohmann::json& info, const std::vector<DeviceShard>& shards,
                     int keep = 2);

/// A checkpoint written by several processes at once (the mpi backend,
/// docs/distributed.md). The controller begins it; every process writes the
/// shard files of its devices into the temporary directory begin returned,
/// each file synced before writeShardFile returns; the controller then
/// commits it once every process has: meta.json, the rename into place,
/// `latest` and pruning, as writeCheckpoint does. A process that dies before
/// the commit leaves a temporary that the next write prunes, and `latest`
/// still names the previous checkpoint.
struct WrittenShardFile {
  std::string name;
  std::uint64_t bytes = 0;
  std::string checksum;
  /// Every tensor the file holds a piece of, with its dtype and global shape.
  std::map<std::string, std::pair<ir::DType, Shape>> tensors;
};

/// Throws as writeCheckpoint for a bad step, keep or info, or a step that is
/// already the latest.
std::filesystem::path beginCheckpoint(const std::filesystem::path& dir, std::int64_t step,
                                      const nlohmann::json& info, int keep);
WrittenShardFile writeShardFile(const std::filesystem::path& temp, const DeviceShard& shard);
/// Throws std::invalid_argument when two files disagree on a tensor's dtype
/// or shape (nothing is committed then).
void commitCheckpoint(const std::filesystem::path& dir, const std::filesystem::path& temp, std::int64_t step,
                      const nlohmann::json& info, const std::vector<WrittenShardFile>& files, int keep);
/// Removes a begun checkpoint that will not be committed (best effort).
void abandonCheckpoint(const std::filesystem::path& temp);

struct LoadedCheckpoint {
  std::int64_t step = 0;
  nlohmann::json info;
  /// Whole tensors by name, assembled from the pieces.
  TensorMap tensors;
  /// The step directory read.
  std::filesystem::path path;
};

/// The checkpoint `latest` points to; std::nullopt when `dir` has no `latest` (a
/// fresh run). Verifies the checksums of meta.json and of every shard file and
/// their sizes, that every piece has its tensor's dtype and global shape and lies
/// inside it, and that the pieces of every tensor exactly cover it (no gap;
/// overlaps agree bit for bit); throws CheckpointError naming the file otherwise.
std::optional<LoadedCheckpoint> readLatestCheckpoint(const std::filesystem::path& dir);

}  // namespace meshflow::runtime
