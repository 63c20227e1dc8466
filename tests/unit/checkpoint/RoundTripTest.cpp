// Writing a checkpoint and reading it back: whole tensors bit for bit, whatever the
// devices held; the meta.json and shard-file formats; what the writer refuses.
#include <nlohmann/json.hpp>

#include "CheckpointTestSupport.h"

using namespace meshflow::checkpoint_test;
using Catch::Matchers::Contains;
using meshflow::runtime::readLatestCheckpoint;
using meshflow::runtime::writeCheckpoint;
namespace ckpt = meshflow::runtime::checkpoint;

namespace {

const nlohmann::json kInfo = {{"plan", "dp=2 tp=2"},
                              {"seed", 1234},
                              {"optimizer", {{"kind", "adam"}, {"lr", 0.002}}},
                              {"data", {{"epoch", 1}, {"position", 4096}}}};

int piecesNamed(const fs::path& stepDirectory, const std::string& name) {
  int count = 0;
  for (int device = 0; device < 4; ++device) {
    const fs::path file = stepDirectory / fmt::format("device-{:04}.bin", device);
    for (const ShardPiece& p : ckpt::decodeShard(ckpt::readWholeFile(file), file))
      count += p.name == name;
  }
  return count;
}

std::string refusal(const std::vector<DeviceShard>& shards, std::int64_t step = 10, int keep = 2) {
  TempDir dir;
  try {
    writeCheckpoint(dir.path(), step, kInfo, shards, keep);
  } catch (const std::invalid_argument& e) {
    // Refused before anything was written: not even a temporary is left.
    CHECK(fs::is_empty(dir.path()));
    return e.what();
  }
  FAIL("writeCheckpoint did not refuse the shards");
  return {};
}

}  // namespace

TEST_CASE("sliced and replicated pieces read back as whole tensors, bit for bit", "[checkpoint]") {
  TempDir dir;
  const TensorMap state = sampleState();
  writeCheckpoint(dir.path(), 10, kInfo, fourDevices(state));
  auto loaded = readLatestCheckpoint(dir.path());
  REQUIRE(loaded);
  CHECK(loaded->step == 10);
  CHECK(loaded->info == kInfo);
  CHECK(loaded->path == dir.path() / "step-00000010");
  CHECK(sameTensors(loaded->tensors, state));
  CHECK(readText(dir.path() / "latest") == "step-00000010\n");
}

TEST_CASE("pieces from four devices assemble the same as from one", "[checkpoint]") {
  TempDir four, one;
  const TensorMap state = sampleState(7);
  writeCheckpoint(four.path(), 3, kInfo, fourDevices(state));
  writeCheckpoint(one.path(), 3, kInfo, oneDevice(state));
  auto fromFour = readLatestCheckpoint(four.path());
  auto fromOne = readLatestCheckpoint(one.path());
  REQUIRE(fromFour);
  REQUIRE(fromOne);
  CHECK(sameTensors(fromFour->tensors, fromOne->tensors));
  CHECK(sameTensors(fromOne->tensors, state));
}

TEST_CASE("replicated pieces are stored once; slices once each", "[checkpoint]") {
  TempDir dir;
  writeCheckpoint(dir.path(), 10, kInfo, fourDevices(sampleState()));
  const fs::path step = dir.path() / "step-00000010";
  CHECK(piecesNamed(step, "block0.fc1.b") == 1);
  CHECK(piecesNamed(step, "loss_scale") == 1);
  CHECK(piecesNamed(step, "block0.fc1.w") == 4);
  // Every device still has its file, empty of pieces or not.
  for (int device = 0; device < 4; ++device)
    CHECK(fs::exists(step / fmt::format("device-{:04}.bin", device)));
}

TEST_CASE("partially overlapping pieces that agree are accepted", "[checkpoint]") {
  TempDir dir;
  const Tensor w = meshflow::runtime::randomNormal({4, 6}, 3);
  std::vector<DeviceShard> shards = {{0, {piece("w", w, {0, 0}, {3, 6})}},
                                     {1, {piece("w", w, {1, 0}, {3, 6})}}};
  writeCheckpoint(dir.path(), 1, kInfo, shards);
  CHECK(readLatestCheckpoint(dir.path())->tensors.at("w").bitEqual(w));
}

TEST_CASE("meta.json lists the format, the tensor table and the files", "[checkpoint]") {
  TempDir dir;
  writeCheckpoint(dir.path(), 10, kInfo, fourDevices(sampleState()));
  const fs::path step = dir.path() / "step-00000010";
  const auto meta = nlohmann::json::parse(readText(step / "meta.json"));
  CHECK(meta["format"] == "meshflow-checkpoint");
  CHECK(meta["version"] == 1);
  CHECK(meta["step"] == 10);
  CHECK(meta["info"] == kInfo);
  CHECK(meta["tensors"]["block0.fc1.w"] == nlohmann::json{{"dtype", "f32"}, {"shape", {4, 6}}});
  CHECK(meta["tensors"]["data.position"] == nlohmann::json{{"dtype", "i32"}, {"shape", {3}}});
  CHECK(meta["tensors"]["loss_scale"]["shape"] == nlohmann::json::array());
  REQUIRE(meta["files"].size() == 4);
  for (const auto& file : meta["files"])
    CHECK(file["bytes"] == fs::file_size(step / file["name"].get<std::string>()));
  CHECK(meta["files"][3]["name"] == "device-0003.bin");
}

TEST_CASE("a directory without `latest` is a fresh run", "[checkpoint]") {
  TempDir dir;
  CHECK_FALSE(readLatestCheckpoint(dir.path()));
  CHECK_FALSE(readLatestCheckpoint(dir.path() / "never-created"));
}

TEST_CASE("shard files are little-endian: magic, version, pieces, trailer", "[checkpoint]") {
  const ShardPiece one = wholePiece("x", Tensor::fromF32({1}, {1.0f}));
  const ckpt::Bytes bytes = ckpt::encodeShard({&one});
  // clang-format off
  const ckpt::Bytes expected = {
      'M', 'F', 'C', 'K', 'P', 'T', '\r', '\n',  // magic
      1, 0, 0, 0, 1, 0, 0, 0,                    // version 1, one piece
      1, 0, 0, 0, 'x',                           // name
      1,                                         // f32
      1, 0, 0, 0,                                // rank 1
      1, 0, 0, 0, 0, 0, 0, 0,                    // global shape [1]
      0, 0, 0, 0, 0, 0, 0, 0,                    // offset [0]
      1, 0, 0, 0, 0, 0, 0, 0,                    // local shape [1]
      0x00, 0x00, 0x80, 0x3f};                   // 1.0f
  // clang-format on
  REQUIRE(bytes.size() == expected.size() + 8);
  CHECK(std::equal(expected.begin(), expected.end(), bytes.begin()));
  std::uint64_t trailer = 0;
  for (int i = 0; i < 8; ++i) trailer |= std::uint64_t{bytes[expected.size() + i]} << (8 * i);
  CHECK(trailer == ckpt::fnv1a64(expected));
}

TEST_CASE("the checksum is FNV-1a 64", "[checkpoint]") {
  CHECK(ckpt::fnv1a64(std::string_view("")) == 0xcbf29ce484222325ull);
  CHECK(ckpt::fnv1a64(std::string_view("a")) == 0xaf63dc4c8601ec8cull);
  CHECK(ckpt::fnv1a64(std::string_view("foobar")) == 0x85944171f73967e8ull);
  CHECK(ckpt::checksumText(0xaf63dc4c8601ec8cull) == "af63dc4c8601ec8c");
}

TEST_CASE("the writer refuses shards that could not be read back", "[checkpoint]") {
  const TensorMap state = sampleState();
  auto shards = fourDevices(state);

  SECTION("a gap") {
    // Device 3's quadrant of block0.fc1.w one row up: row 3 is uncovered.
    shards[3].pieces[1] = piece("block0.fc1.w", state.at("block0.fc1.w"), {1, 3}, {2, 3});
    CHECK_THAT(refusal(shards), Contains("tensor 'block0.fc1.w': element [3, 3] is in no piece"));
  }
  SECTION("a missing piece") {
    shards[3].pieces.erase(shards[3].pieces.begin() + 1);
    CHECK_THAT(refusal(shards), Contains("tensor 'block0.fc1.w': the pieces hold 18 elements, too "
                                         "few to cover the shape [4, 6]"));
  }
  SECTION("replicas that disagree") {
    shards[2].pieces[0].tensor.f32()[5] += 1.0f;  // block0.fc1.b
    CHECK_THAT(refusal(shards),
               Contains("tensor 'block0.fc1.b': device 2: overlaps device 0 at element [5] with "
                        "different bits"));
  }
  SECTION("a piece outside its tensor") {
    shards[1].pieces[1].offset = {3, 3};
    CHECK_THAT(refusal(shards),
               Contains("device 1: a block of shape [2, 3] at offset [3, 3] lies outside the "
                        "shape [4, 6]"));
  }
  SECTION("pieces that disagree on the dtype") {
    shards[1].pieces[3] = wholePiece("data.position", Tensor::zeros({3}));
    CHECK_THAT(refusal(shards), Contains("device 1: an f32 piece of an i32 tensor"));
  }
  SECTION("a negative dimension") {
    for (DeviceShard& shard : shards) shard.pieces[0].globalShape = {-6};
    CHECK_THAT(refusal(shards),
               Contains("tensor 'block0.fc1.b': negative dimension in the shape [-6]"));
  }
  SECTION("bad arguments") {
    CHECK_THAT(refusal(shards, -1), Contains("step -1 is negative"));
    CHECK_THAT(refusal(shards, 10, 0), Contains("keep is 0"));
    shards[1].device = 0;
    CHECK_THAT(refusal(shards), Contains("device 0 is negative or holds two shards"));
  }
}

TEST_CASE("scalars, i32 tensors and empty tensors round trip", "[checkpoint]") {
  TempDir dir;
  TensorMap state;
  state["scalar"] = Tensor::scalar(-0.0f);
  state["ids"] = Tensor::fromI32({2, 2}, {-1, 0, 2147483647, -2147483647 - 1});
  state["empty"] = Tensor::zeros({0, 5});
  writeCheckpoint(dir.path(), 0, nullptr, oneDevice(state));
  auto loaded = readLatestCheckpoint(dir.path());
  REQUIRE(loaded);
  CHECK(loaded->info.is_null());
  CHECK(sameTensors(loaded->tensors, state));
}

TEST_CASE("half-precision tensors read back bit for bit, 2 bytes an element", "[checkpoint][half]") {
  // A mixed-precision run's state: half parameters beside their fp32 masters.
  TempDir dir;
  TensorMap state = sampleState(3);
  state["block0.fc1.w.master"] = state.at("block0.fc1.w");
  state["block0.fc1.w"] = state.at("block0.fc1.w.master").castTo(meshflow::ir::DType::BF16);
  state["block0.fc1.b"] = state.at("block0.fc1.b").castTo(meshflow::ir::DType::F16);
  writeCheckpoint(dir.path(), 4, kInfo, fourDevices(state));
  auto loaded = readLatestCheckpoint(dir.path());
  REQUIRE(loaded);
  CHECK(loaded->tensors.at("block0.fc1.w").typeText() == "bf16[4, 6]");
  CHECK(loaded->tensors.at("block0.fc1.b").typeText() == "f16[6]");
  CHECK(sameTensors(loaded->tensors, state));
}

namespace {

// Replica `replica` of `replicas`'s flat piece of the block of `whole` at
// `offset` with shape `shape`: a run of ceil(n / replicas) of its row-major
// elements (shorter at the end, none past it), as a sharded optimizer holds it.
ShardPiece flatPiece(const std::string& name, const Tensor& whole, std::vector<std::int64_t> offset, Shape shape,
                     int replica, int replicas) {
  const Tensor box = block(whole, offset, shape);
  const std::int64_t n = box.elements();
  const std::int64_t c = (n + replicas - 1) / replicas;
  const std::int64_t begin = std::min(n, replica * c);
  const std::int64_t count = std::min(n, begin + c) - begin;
  Tensor run(box.dtype(), {count});
  std::copy_n(box.f32().begin() + begin, count, run.f32().begin());
  ShardPiece piece{name, whole.shape(), std::move(offset), std::move(run)};
  piece.flat = meshflow::runtime::FlatRange{std::move(shape), begin};
  return piece;
}

ShardPiece& pieceNamed(DeviceShard& shard, const std::string& name) {
  return *std::find_if(shard.pieces.begin(), shard.pieces.end(), [&](const ShardPiece& p) { return p.name == name; });
}

// `state`'s matrices held as 3 replicas' flat runs of two column halves (a
// sharded optimizer on (1, 2) tensor-parallel meshes), the rest whole.
std::vector<DeviceShard> flatShards(const TensorMap& state) {
  std::vector<DeviceShard> shards;
  for (int device = 0; device < 6; ++device) {
    DeviceShard& shard = shards.emplace_back(DeviceShard{device, {}});
    const int replica = device / 2, member = device % 2;
    for (const auto& [name, tensor] : state) {
      if (tensor.shape() == Shape{4, 6})
        shard.pieces.push_back(flatPiece(name, tensor, {0, 3 * member}, {4, 3}, replica, 3));
      else
        shard.pieces.push_back(wholePiece(name, tensor));
    }
  }
  return shards;
}

}  // namespace

TEST_CASE("flat pieces of a sharded optimizer read back as whole tensors", "[checkpoint][zero]") {
  TempDir dir;
  const TensorMap state = sampleState(11);
  writeCheckpoint(dir.path(), 10, kInfo, flatShards(state));
  auto loaded = readLatestCheckpoint(dir.path());
  REQUIRE(loaded);
  CHECK(sameTensors(loaded->tensors, state));
  // Each flat run is stored once, by the device that holds it.
  const fs::path file = dir.path() / "step-00000010" / "device-0003.bin";
  auto pieces = ckpt::decodeShard(ckpt::readWholeFile(file), file);
  auto matrix =
      std::find_if(pieces.begin(), pieces.end(), [](const ShardPiece& p) { return p.name == "block0.fc1.w"; });
  REQUIRE(matrix != pieces.end());
  REQUIRE(matrix->flat);
  CHECK(matrix->flat->block == Shape{4, 3});
  CHECK(matrix->flat->begin == 4);
  CHECK(matrix->offset == std::vector<std::int64_t>{0, 3});
  CHECK(matrix->tensor.bitEqual(pieceNamed(flatShards(state)[3], "block0.fc1.w").tensor));
}

TEST_CASE("a shard file with a flat piece is version 2: each piece says its kind", "[checkpoint][zero]") {
  ShardPiece flat{"x", {2}, {0}, Tensor::fromF32({1}, {1.0f})};
  flat.flat = meshflow::runtime::FlatRange{{2}, 1};
  const ShardPiece whole = wholePiece("y", Tensor::fromF32({1}, {1.0f}));
  const ckpt::Bytes bytes = ckpt::encodeShard({&flat, &whole});
  // clang-format off
  const ckpt::Bytes expected = {
      'M', 'F', 'C', 'K', 'P', 'T', '\r', '\n',  // magic
      2, 0, 0, 0, 2, 0, 0, 0,                    // version 2, two pieces
      1, 0, 0, 0, 'x', 1, 1, 0, 0, 0,            // name, f32, rank 1
      2, 0, 0, 0, 0, 0, 0, 0,                    // global shape [2]
      0, 0, 0, 0, 0, 0, 0, 0,                    // offset [0]
      2, 0, 0, 0, 0, 0, 0, 0,                    // the block's shape [2]
      1,                                         // flat
      1, 0, 0, 0, 0, 0, 0, 0,                    // from element 1
      1, 0, 0, 0, 0, 0, 0, 0,                    // one element
      0x00, 0x00, 0x80, 0x3f,                    // 1.0f
      1, 0, 0, 0, 'y', 1, 1, 0, 0, 0,            // name, f32, rank 1
      1, 0, 0, 0, 0, 0, 0, 0,                    // global shape [1]
      0, 0, 0, 0, 0, 0, 0, 0,                    // offset [0]
      1, 0, 0, 0, 0, 0, 0, 0,                    // local shape [1]
      0,                                         // a block
      0x00, 0x00, 0x80, 0x3f};                   // 1.0f
  // clang-format on
  REQUIRE(bytes.size() == expected.size() + 8);
  CHECK(std::equal(expected.begin(), expected.end(), bytes.begin()));
  auto back = ckpt::decodeShard(bytes, "x.bin");
  REQUIRE(back.size() == 2);
  REQUIRE(back[0].flat);
  CHECK(back[0].flat->begin == 1);
  CHECK(back[0].flat->block == Shape{2});
  CHECK(!back[1].flat);
}

TEST_CASE("flat pieces that leave a gap or lie outside their block are refused", "[checkpoint][zero]") {
  const TensorMap state = sampleState(12);
  auto gap = flatShards(state);
  // Replica 2's run of the first column half one element early: it overlaps
  // replica 1's (with the same bits) and leaves the block's last element out.
  ShardPiece& early = pieceNamed(gap[4], "block0.fc1.w");
  const Tensor box = block(state.at("block0.fc1.w"), {0, 0}, {4, 3});
  early.flat->begin = 7;
  std::copy_n(box.f32().begin() + 7, 4, early.tensor.f32().begin());
  CHECK_THAT(refusal(gap), Contains("tensor 'block0.fc1.w': element [3, 2] is in no piece"));
  auto outside = flatShards(state);
  pieceNamed(outside[5], "block0.fc1.w").flat->begin = 9;  // 4 elements from 9 run past the 12 of the block
  CHECK_THAT(refusal(outside), Contains("lies outside the block of shape [4, 3]"));
}
