// libFuzzer target: a checkpoint directory (`latest`, meta.json, shard files)
// read by runtime::readLatestCheckpoint, as a resumed run reads one written by
// another run or another version. The input is a CheckpointBundle; by default
// the checksums are made right after mutation so that the fuzzer reaches the
// parsers behind them (flag bits off test the checksums themselves). A
// CheckpointError is the expected outcome of a bad checkpoint; a crash, an
// escaped exception, a hang or an allocation beyond the file's size is a bug.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/CheckpointLayout.h"
#include "tests/fuzz/CheckpointBundle.h"
#include "tests/fuzz/FuzzCheck.h"

namespace {

namespace fs = std::filesystem;
using namespace meshflow;

constexpr std::string_view kScratchPrefix = "meshflow-fuzz-checkpoint-";

// libFuzzer ends some processes without running atexit handlers (-fork's
// children, a timeout): their folders are removed by the next process instead.
void removeFoldersOfEndedProcesses(const fs::path& base) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(base, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kScratchPrefix)) continue;
    const int pid = std::atoi(name.c_str() + kScratchPrefix.size());
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), error);
  }
}

fs::path makeScratch() {
  fs::path base = fs::exists("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
  removeFoldersOfEndedProcesses(base);
  fs::path dir = base / (std::string(kScratchPrefix) + std::to_string(::getpid()));
  fs::remove_all(dir);  // left by an ended process of the same id: writeBundle starts empty
  fs::create_directories(dir);
  return dir;
}

void removeScratch();

// One folder per process, in memory where there is /dev/shm.
// Its removal is registered once the path exists, so that it runs before the
// path is destroyed at exit.
const fs::path& scratch() {
  static const fs::path dir = makeScratch();
  static const bool removedAtExit = std::atexit(removeScratch) == 0;
  (void)removedAtExit;
  return dir;
}

void removeScratch() {
  std::error_code ignored;
  fs::remove_all(scratch(), ignored);
}

void writeFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The step folder `latest` names when it names one, so that the reader gets past it.
std::string stepFolder(const std::string& latest) {
  std::string line = latest.substr(0, latest.find('\n'));
  return runtime::checkpoint::parseStepDirectoryName(line) ? line : "step-00000000";
}

// What the folder holds: the step folder and the number of shard files in it.
struct Written {
  std::string step;
  std::size_t shards = 0;
};

// Makes `dir` hold exactly the bundle's files. Only this function writes there,
// so it removes only what the previous input wrote and this one does not
// (emptying and rebuilding the folder each time was a fifth of the target's time).
void writeBundle(const fuzz::CheckpointBundle& bundle, const fs::path& dir) {
  static Written written;
  const std::string stepName = stepFolder(bundle.latest);
  const fs::path step = dir / stepName;
  if (stepName != written.step) {
    if (!written.step.empty()) fs::remove_all(dir / written.step);
    fs::create_directories(step);
    written = {stepName, 0};
  }
  for (std::size_t i = bundle.shards.size(); i < written.shards; ++i)
    fs::remove(step / fuzz::CheckpointBundle::shardName(i));
  written.shards = bundle.shards.size();
  writeFile(dir / runtime::checkpoint::kLatestFile, bundle.latest);
  writeFile(step / runtime::checkpoint::kMetaFile, bundle.meta);
  for (std::size_t i = 0; i < bundle.shards.size(); ++i)
    writeFile(step / fuzz::CheckpointBundle::shardName(i), bundle.shards[i]);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::CheckpointBundle bundle = fuzz::CheckpointBundle::decode(data, size);
  bundle.repair();
  writeBundle(bundle, scratch());
  try {
    runtime::readLatestCheckpoint(scratch());
  } catch (const runtime::CheckpointError&) {
  }
  return 0;
}
