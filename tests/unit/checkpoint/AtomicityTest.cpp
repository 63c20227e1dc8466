// A write that dies, at any point, leaves the previous checkpoint the latest; old
// checkpoints and dead writes' temporaries are pruned.
#include <sys/stat.h>

#include "CheckpointTestSupport.h"

using namespace meshflow::checkpoint_test;
using Catch::Matchers::Contains;
using meshflow::runtime::CheckpointWriteOptions;
using meshflow::runtime::readLatestCheckpoint;
using meshflow::runtime::writeCheckpoint;

namespace {

struct Crash : std::runtime_error {
  Crash() : std::runtime_error("injected crash") {}
};

/// Options whose hook throws Crash before stage `at`.
CheckpointWriteOptions crashBefore(std::string at, int keep = 2) {
  return {keep, [at](std::string_view stage) {
            if (stage == at) throw Crash();
          }};
}

std::int64_t latestStep(const fs::path& dir) {
  auto loaded = readLatestCheckpoint(dir);
  REQUIRE(loaded);
  return loaded->step;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

void writeStep(const fs::path& dir, std::int64_t step, int keep = 2) {
  writeCheckpoint(dir, step, {{"step", step}}, fourDevices(sampleState(step)), keep);
}

}  // namespace

TEST_CASE("a killed write's leftover temporary is ignored, then pruned", "[checkpoint]") {
  TempDir dir;
  writeStep(dir.path(), 10);
  // What a write of step 20 killed halfway leaves: a temporary with half a shard
  // file and no meta.json.
  const fs::path leftover = dir.path() / ".tmp-step-00000020-4242-17";
  fs::create_directory(leftover);
  writeText(leftover / "device-0000.bin", "MFCKPT\r\n\x01\x00");
  writeText(dir.path() / ".tmp-latest", "step-000000");

  CHECK(latestStep(dir.path()) == 10);
  writeStep(dir.path(), 20);
  CHECK(latestStep(dir.path()) == 20);
  CHECK(entries(dir.path()) ==
        std::vector<std::string>{"latest", "step-00000010", "step-00000020"});
}

TEST_CASE("a write that fails at any stage leaves `latest` unchanged", "[checkpoint]") {
  const std::string stage =
      GENERATE("device-0000.bin", "device-0002.bin", "meta.json", "rename", "latest");
  CAPTURE(stage);
  TempDir dir;
  writeStep(dir.path(), 10);
  const auto before = readLatestCheckpoint(dir.path());

  CHECK_THROWS_AS(
      writeCheckpoint(dir.path(), 20, {}, fourDevices(sampleState(20)), crashBefore(stage)), Crash);
  auto after = readLatestCheckpoint(dir.path());
  REQUIRE(after);
  CHECK(after->step == 10);
  CHECK(sameTensors(after->tensors, before->tensors));
  // The exception cleaned up the temporary; a crash past the rename leaves a
  // complete step directory that `latest` does not name.
  for (const std::string& name : entries(dir.path())) CHECK_FALSE(name.starts_with(".tmp-"));
  CHECK(fs::exists(dir.path() / "step-00000020") == (stage == "latest"));

  // Writing the step again (after resuming from step 10) replaces what was left.
  writeStep(dir.path(), 20);
  CHECK(latestStep(dir.path()) == 20);
}

TEST_CASE("a failure while pruning leaves the new checkpoint the latest", "[checkpoint]") {
  TempDir dir;
  writeStep(dir.path(), 10);
  CHECK_THROWS_AS(
      writeCheckpoint(dir.path(), 20, {}, fourDevices(sampleState(20)), crashBefore("prune")),
      Crash);
  CHECK(latestStep(dir.path()) == 20);
}

TEST_CASE("a write to a directory that cannot be created or written fails cleanly",
          "[checkpoint]") {
  TempDir dir;
  SECTION("a path through a regular file") {
    writeText(dir.path() / "file", "not a directory");
    CHECK_THROWS_AS(writeStep(dir.path() / "file" / "ckpt", 10), fs::filesystem_error);
  }
  SECTION("a read-only directory") {
    // root writes to read-only directories anyway; the case means something only
    // for other users.
    if (::geteuid() == 0) return;
    writeStep(dir.path(), 10);
    ::chmod(dir.path().c_str(), 0555);
    CHECK_THROWS_AS(writeStep(dir.path(), 20), fs::filesystem_error);
    ::chmod(dir.path().c_str(), 0755);
    CHECK(latestStep(dir.path()) == 10);
  }
}

TEST_CASE("keep prunes older step directories after the pointer moves", "[checkpoint]") {
  TempDir dir;
  for (std::int64_t step : {10, 20, 30, 40}) writeStep(dir.path(), step);
  CHECK(entries(dir.path()) ==
        std::vector<std::string>{"latest", "step-00000030", "step-00000040"});
  writeStep(dir.path(), 50, 3);
  CHECK(entries(dir.path()) ==
        std::vector<std::string>{"latest", "step-00000030", "step-00000040", "step-00000050"});
  writeStep(dir.path(), 60, 1);
  CHECK(entries(dir.path()) == std::vector<std::string>{"latest", "step-00000060"});
}

TEST_CASE("step directories newer than the one written are left alone", "[checkpoint]") {
  // A run that resumed from step 10 while step 30 (written by a run after it) is
  // still there: step 30 is not pruned, and is replaced when this run reaches it.
  TempDir dir;
  writeStep(dir.path(), 10);
  fs::create_directory(dir.path() / "step-00000030");
  writeStep(dir.path(), 20, 1);
  CHECK(entries(dir.path()) ==
        std::vector<std::string>{"latest", "step-00000020", "step-00000030"});
  writeStep(dir.path(), 30, 1);
  CHECK(latestStep(dir.path()) == 30);
}

TEST_CASE("the latest checkpoint is never overwritten in place", "[checkpoint]") {
  TempDir dir;
  writeStep(dir.path(), 10);
  CHECK_THROWS_WITH(writeStep(dir.path(), 10),
                    Contains("writeCheckpoint: step 10 is already the latest checkpoint"));
  CHECK(latestStep(dir.path()) == 10);
}
