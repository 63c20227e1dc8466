// What the checkpoint tests share: a temporary directory, tensors cut into the
// pieces devices would hold, and a way to rewrite one shard file of a written
// checkpoint (keeping meta.json consistent) so the reader's own checks can be hit.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointFormat.h"
#include "runtime/checkpoint/CheckpointMeta.h"

namespace meshflow::checkpoint_test {

namespace fs = std::filesystem;
using runtime::CheckpointError;
using runtime::DeviceShard;
using runtime::Shape;
using runtime::ShardPiece;
using runtime::Tensor;
using runtime::TensorMap;

/// A fresh directory under the system's temporary directory, removed with
/// everything in it when the test ends.
class TempDir {
 public:
  TempDir()
      : path_(fs::temp_directory_path() /
              fmt::format("meshflow-checkpoint-{}-{:08x}", ::getpid(), std::random_device{}())) {
    fs::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }

  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

/// The block of `whole` at `offset` with shape `shape` (any dtype, any rank).
inline Tensor block(const Tensor& whole, const std::vector<std::int64_t>& offset,
                    const Shape& shape) {
  Tensor out(whole.dtype(), shape);
  const auto strides = runtime::rowMajorStrides(whole.shape());
  const auto size = static_cast<std::int64_t>(ir::dtypeBytes(whole.dtype()));
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::int64_t i = 0; i < out.elements(); ++i) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) flat += (offset[d] + index[d]) * strides[d];
    std::copy_n(whole.raw().begin() + flat * size, size, out.raw().begin() + i * size);
    for (std::size_t d = shape.size(); d-- > 0 && ++index[d] == shape[d];) index[d] = 0;
  }
  return out;
}

inline ShardPiece piece(const std::string& name, const Tensor& whole,
                        std::vector<std::int64_t> offset, Shape shape) {
  return {name, whole.shape(), offset, block(whole, offset, shape)};
}

inline ShardPiece wholePiece(const std::string& name, const Tensor& whole) {
  return {name, whole.shape(), std::vector<std::int64_t>(whole.rank(), 0), whole};
}

/// Training state of a small model: a matrix with its Adam moment, a bias, an i32
/// counter and a scalar.
inline TensorMap sampleState(std::uint64_t seed = 1) {
  TensorMap state;
  state["block0.fc1.w"] = runtime::randomNormal({4, 6}, seed);
  state["block0.fc1.w.adam_m"] = runtime::randomNormal({4, 6}, seed + 1, 0.1f);
  state["block0.fc1.b"] = runtime::randomNormal({6}, seed + 2);
  state["data.position"] = runtime::randomInts({3}, 0, 1000, seed + 3);
  state["loss_scale"] = Tensor::scalar(1024.0f);
  return state;
}

/// The 2x2 block of a [4, 6] matrix device `device` (0..3) holds.
inline std::vector<std::int64_t> quadrant(int device) {
  return {2 * (device / 2), 3 * (device % 2)};
}

/// `state` over four devices: each holds one [2, 3] quadrant of the matrices
/// (tensor-parallel along both dimensions) and a whole copy of everything else
/// (replicated).
inline std::vector<DeviceShard> fourDevices(const TensorMap& state) {
  std::vector<DeviceShard> shards;
  for (int device = 0; device < 4; ++device) {
    DeviceShard& shard = shards.emplace_back(DeviceShard{device, {}});
    for (const auto& [name, tensor] : state) {
      if (tensor.shape() == Shape{4, 6})
        shard.pieces.push_back(piece(name, tensor, quadrant(device), {2, 3}));
      else
        shard.pieces.push_back(wholePiece(name, tensor));
    }
  }
  return shards;
}

/// All of `state` whole on one device.
inline std::vector<DeviceShard> oneDevice(const TensorMap& state) {
  DeviceShard shard{0, {}};
  for (const auto& [name, tensor] : state) shard.pieces.push_back(wholePiece(name, tensor));
  return {shard};
}

inline bool sameTensors(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [name, tensor] : a)
    if (!b.contains(name) || !b.at(name).bitEqual(tensor)) return false;
  return true;
}

inline std::string readText(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void writeText(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary) << text;
}

/// Replaces shard file `name` of `stepDirectory` with one holding `pieces`, and
/// updates meta.json's size and checksum of it, so that the checkpoint is well
/// formed file by file and only the pieces' geometry or values are wrong.
inline void rewriteShard(const fs::path& stepDirectory, const std::string& name,
                         const std::vector<ShardPiece>& pieces) {
  std::vector<const ShardPiece*> pointers;
  for (const ShardPiece& p : pieces) pointers.push_back(&p);
  const auto bytes = runtime::checkpoint::encodeShard(pointers);
  runtime::checkpoint::writeFileDurably(stepDirectory / name, bytes);
  const fs::path metaFile = stepDirectory / "meta.json";
  auto meta = runtime::checkpoint::parseMeta(readText(metaFile), metaFile);
  for (auto& file : meta.files)
    if (file.name == name) {
      file.bytes = bytes.size();
      file.checksum = runtime::checkpoint::checksumText(runtime::checkpoint::fnv1a64(bytes));
    }
  writeText(metaFile, runtime::checkpoint::metaText(meta));
}

/// The CheckpointError reading `dir` throws; fails the test if it throws none.
inline CheckpointError readError(const fs::path& dir) {
  try {
    runtime::readLatestCheckpoint(dir);
  } catch (const CheckpointError& e) {
    return e;
  }
  FAIL("readLatestCheckpoint did not throw CheckpointError");
  throw std::logic_error("unreachable");
}

}  // namespace meshflow::checkpoint_test
