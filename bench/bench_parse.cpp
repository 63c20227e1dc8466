// The parser's two front ends on the tree's .mesh files: grammar::parse (the
// direct parser, ANTLR only for sources with errors) against the ANTLR front
// end alone, which was the only one before. Rounds alternate between the two;
// prints the median time per file of each, over all files and over the files
// without errors (those the direct parser takes).
//   bench_parse [ROUNDS] (default 20), from the source tree's root.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "grammar/Parser.h"

namespace {

namespace fs = std::filesystem;
using meshflow::interp::SourceFile;

std::vector<std::shared_ptr<SourceFile>> sources() {
  std::vector<std::shared_ptr<SourceFile>> files;
  for (const char* folder : {"tests/golden", "examples", "stdlib"})
    for (const auto& entry : fs::recursive_directory_iterator(folder))
      if (entry.path().extension() == ".mesh") {
        std::ifstream in(entry.path(), std::ios::binary);
        files.push_back(std::make_shared<SourceFile>(
            entry.path().string(),
            std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>())));
      }
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a->name() < b->name(); });
  return files;
}

// Microseconds per file for one pass over `files`.
template <typename Parse>
double microsecondsPerFile(const std::vector<std::shared_ptr<SourceFile>>& files, Parse parse) {
  auto start = std::chrono::steady_clock::now();
  for (const auto& file : files) parse(file);
  std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
  return elapsed.count() / static_cast<double>(files.size());
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 20;
  auto all = sources();
  if (all.empty()) {
    std::fprintf(stderr, "no .mesh files found: run from the source tree's root\n");
    return 1;
  }
  std::vector<std::shared_ptr<SourceFile>> clean;
  std::size_t bytes = 0;
  for (const auto& file : all) {
    bytes += file->text().size();
    if (meshflow::grammar::parseWithAntlr(file).ok()) clean.push_back(file);
  }
  std::printf(
      "%zu files (%zu bytes on average), %zu without errors; median of %d alternated rounds\n",
      all.size(), bytes / all.size(), clean.size(), rounds);
  std::printf("%-22s %12s %12s %8s\n", "files", "ANTLR µs", "parse µs", "ratio");
  for (const auto* set : {&all, &clean}) {
    std::vector<double> antlr, parse;
    for (int round = 0; round < rounds; ++round) {
      antlr.push_back(microsecondsPerFile(*set, meshflow::grammar::parseWithAntlr));
      parse.push_back(microsecondsPerFile(*set, meshflow::grammar::parse));
    }
    double a = median(antlr), p = median(parse);
    std::printf("%-22s %12.1f %12.1f %7.1fx\n", set == &all ? "all" : "without errors", a, p,
                a / p);
  }
  return 0;
}
