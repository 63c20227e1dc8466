// Runs saved inputs through a fuzz target's entry point without libFuzzer: the
// regression tests of the normal and sanitizer builds (tests/fuzz/Fuzz.cmake).
// Arguments are files or folders (every file in them, in name order); a crash,
// an abort or an escaped exception fails the test, as it fails the fuzzer.
// `--rounds N` first runs them all N times (default 1) and prints the inputs
// per CPU second: the speed of a target on its seeds, without the fuzzer.
#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputsOf(const fs::path& path) {
  if (!fs::is_directory(path)) return {path};
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(path))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

double cpuSeconds() {
  return static_cast<double>(std::clock()) / CLOCKS_PER_SEC;
}

}  // namespace

int main(int argc, char** argv) {
  int first = 1;
  long rounds = 1;
  if (argc > 2 && std::strcmp(argv[1], "--rounds") == 0) {
    rounds = std::max(1L, std::strtol(argv[2], nullptr, 10));
    first = 3;
  }
  std::vector<std::pair<fs::path, std::vector<std::uint8_t>>> inputs;
  for (int i = first; i < argc; ++i)
    for (const fs::path& file : inputsOf(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "cannot read %s\n", file.c_str());
        return 1;
      }
      inputs.emplace_back(file, std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)), {}));
    }
  const double start = cpuSeconds();
  for (long round = 0; round < rounds; ++round)
    for (const auto& [file, bytes] : inputs) {
      if (round == 0) std::fprintf(stderr, "%s\n", file.c_str());
      LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    }
  const double seconds = cpuSeconds() - start;
  const double runs = static_cast<double>(inputs.size()) * static_cast<double>(rounds);
  std::printf("%zu inputs ran without a failure (%.0f runs in %.2f CPU s: %.0f per second)\n",
              inputs.size(), runs, seconds, seconds > 0 ? runs / seconds : 0.0);
  return inputs.empty() ? 1 : 0;
}
