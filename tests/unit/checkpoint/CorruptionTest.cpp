// A broken checkpoint is refused with a CheckpointError naming the file (and the
// tensor) at fault: each check of the reader, hit on its own.
#include "CheckpointTestSupport.h"

using namespace meshflow::checkpoint_test;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using meshflow::runtime::readLatestCheckpoint;
using meshflow::runtime::writeCheckpoint;
namespace ckpt = meshflow::runtime::checkpoint;

namespace {

/// A checkpoint of sampleState() at step 10 over four devices.
struct Written {
  TempDir dir;
  TensorMap state = sampleState();
  fs::path step;

  Written() : step(dir.path() / "step-00000010") {
    writeCheckpoint(dir.path(), 10, {{"seed", 1234}}, fourDevices(state));
  }
  fs::path shard(int device) const { return step / fmt::format("device-{:04}.bin", device); }
};

void flipByte(const fs::path& file, std::size_t at) {
  std::string bytes = readText(file);
  bytes.at(at) ^= 0x10;
  writeText(file, bytes);
}

void checkError(const CheckpointError& e, const fs::path& file, const std::string& detail,
                const std::string& tensor = {}) {
  CHECK(e.file() == file);
  CHECK(e.tensor() == tensor);
  CHECK_THAT(e.detail(), Contains(detail));
  CHECK_THAT(e.what(), StartsWith(file.string() + ": "));
}

}  // namespace

TEST_CASE("a truncated shard file is refused", "[checkpoint]") {
  Written c;
  fs::resize_file(c.shard(1), fs::file_size(c.shard(1)) / 2);
  checkError(readError(c.dir.path()), c.shard(1), "bytes, but meta.json says");
}

TEST_CASE("a flipped byte in a shard file is refused", "[checkpoint]") {
  Written c;
  flipByte(c.shard(2), fs::file_size(c.shard(2)) - 20);
  checkError(readError(c.dir.path()), c.shard(2), "checksum mismatch: the contents hash to");
}

TEST_CASE("a flipped byte in meta.json is refused", "[checkpoint]") {
  Written c;
  const fs::path meta = c.step / "meta.json";
  std::string text = readText(meta);
  text.replace(text.find("\"seed\": 1234"), 12, "\"seed\": 1235");
  writeText(meta, text);
  checkError(readError(c.dir.path()), meta, "checksum mismatch");
}

TEST_CASE("a missing shard file or meta.json is refused", "[checkpoint]") {
  Written c;
  SECTION("shard") {
    fs::remove(c.shard(3));
    checkError(readError(c.dir.path()), c.shard(3), "missing (meta.json lists it)");
  }
  SECTION("meta.json") {
    fs::remove(c.step / "meta.json");
    checkError(readError(c.dir.path()), c.step / "meta.json", "missing");
  }
}

TEST_CASE("meta.json that is not JSON, or holds another step, is refused", "[checkpoint]") {
  Written c;
  SECTION("not JSON") {
    writeText(c.step / "meta.json", "{\"format\": ");
    checkError(readError(c.dir.path()), c.step / "meta.json", "not valid JSON");
  }
  SECTION("another step") {
    fs::rename(c.step, c.dir.path() / "step-00000011");
    writeText(c.dir.path() / "latest", "step-00000011\n");
    checkError(readError(c.dir.path()), c.dir.path() / "step-00000011" / "meta.json",
               "holds step 10, but its directory is step-00000011");
  }
}

TEST_CASE("a garbage or dangling `latest` is refused", "[checkpoint]") {
  Written c;
  const fs::path latest = c.dir.path() / "latest";
  SECTION("garbage") {
    writeText(latest, "step-0000\x01\x02junk");
    checkError(readError(c.dir.path()), latest,
               "not a checkpoint pointer: expected one line step-<digits>, found "
               "\"step-0000\\x01\\x02junk\"");
  }
  SECTION("empty") {
    writeText(latest, "");
    checkError(readError(c.dir.path()), latest, "not a checkpoint pointer");
  }
  SECTION("dangling") {
    writeText(latest, "step-00000099\n");
    checkError(readError(c.dir.path()), latest, "names step-00000099, which is not a directory");
  }
}

TEST_CASE("shard files whose pieces leave a gap are refused", "[checkpoint]") {
  Written c;
  const Tensor& w = c.state.at("block0.fc1.w");
  const ShardPiece adam =
      piece("block0.fc1.w.adam_m", c.state.at("block0.fc1.w.adam_m"), {2, 3}, {2, 3});
  SECTION("a block moved onto another") {
    // Rows 1 and 2 instead of 2 and 3: as many elements as before, one row uncovered.
    rewriteShard(c.step, "device-0003.bin", {piece("block0.fc1.w", w, {1, 3}, {2, 3}), adam});
    checkError(readError(c.dir.path()), c.step / "meta.json",
               "element [3, 3] is in no piece (pieces in device-0000.bin, device-0001.bin, "
               "device-0002.bin, device-0003.bin)",
               "block0.fc1.w");
  }
  SECTION("a block missing") {
    rewriteShard(c.step, "device-0003.bin", {adam});
    checkError(readError(c.dir.path()), c.step / "meta.json",
               "the pieces hold 18 elements, too few to cover the shape [4, 6] (pieces in "
               "device-0000.bin, device-0001.bin, device-0002.bin)",
               "block0.fc1.w");
  }
}

TEST_CASE("overlapping pieces that disagree are refused", "[checkpoint]") {
  Written c;
  const Tensor& w = c.state.at("block0.fc1.w");
  Tensor wrong = w;
  wrong.f32()[13] += 1.0f;  // element [2, 1], in device 2's quadrant
  rewriteShard(c.step, "device-0003.bin",
               {piece("block0.fc1.w", w, {2, 3}, {2, 3}),
                piece("block0.fc1.w.adam_m", c.state.at("block0.fc1.w.adam_m"), {2, 3}, {2, 3}),
                piece("block0.fc1.w", wrong, {2, 0}, {2, 3})});
  checkError(readError(c.dir.path()), c.shard(3),
             "overlaps device-0002.bin at element [2, 1] with different bits", "block0.fc1.w");
}

TEST_CASE("pieces that do not match the tensor table are refused", "[checkpoint]") {
  Written c;
  const Tensor& w = c.state.at("block0.fc1.w");
  const ShardPiece adam =
      piece("block0.fc1.w.adam_m", c.state.at("block0.fc1.w.adam_m"), {2, 3}, {2, 3});
  SECTION("another dtype") {
    ShardPiece ints{"block0.fc1.w", {4, 6}, {2, 3}, Tensor(meshflow::ir::DType::I32, {2, 3})};
    rewriteShard(c.step, "device-0003.bin", {ints, adam});
    checkError(readError(c.dir.path()), c.shard(3), "an i32 piece of an f32 tensor",
               "block0.fc1.w");
  }
  SECTION("outside the tensor") {
    rewriteShard(c.step, "device-0001.bin",
                 {{"block0.fc1.w", {4, 6}, {0, 4}, Tensor::zeros({2, 3})}});
    checkError(readError(c.dir.path()), c.shard(1),
               "a block of shape [2, 3] at offset [0, 4] lies outside the shape [4, 6]",
               "block0.fc1.w");
  }
  SECTION("not in the table") {
    rewriteShard(c.step, "device-0003.bin",
                 {piece("block0.fc1.w", w, {2, 3}, {2, 3}), adam, wholePiece("extra", w)});
    checkError(readError(c.dir.path()), c.shard(3), "not in meta.json's tensor table", "extra");
  }
}

TEST_CASE("shard bytes that do not decode are refused", "[checkpoint]") {
  const ShardPiece one = wholePiece("x", Tensor::fromF32({2}, {1.0f, 2.0f}));
  const ckpt::Bytes good = ckpt::encodeShard({&one});
  const fs::path file = "device-0007.bin";
  auto decodeError = [&](const ckpt::Bytes& bytes) {
    try {
      ckpt::decodeShard(bytes, file);
    } catch (const CheckpointError& e) {
      CHECK(e.file() == file);
      return std::string(e.detail());
    }
    FAIL("decodeShard did not throw");
    return std::string();
  };
  CHECK(ckpt::decodeShard(good, file).at(0).tensor.bitEqual(one.tensor));
  CHECK_THAT(decodeError(ckpt::Bytes(good.begin(), good.begin() + 20)),
             Contains("truncated: 20 bytes is less than a shard file's header and trailer"));
  CHECK_THAT(decodeError(ckpt::Bytes(good.begin(), good.end() - 4)), Contains("checksum mismatch"));
  ckpt::Bytes other = good;
  other[0] = 'X';
  CHECK_THAT(decodeError(other), Contains("not a meshflow shard file (bad magic)"));
}
