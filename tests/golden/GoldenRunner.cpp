// Runs the golden tests: every tests/golden/<area>/*.mesh file goes through the
// interpreter and its printed output, rendered diagnostics and exit status are
// compared with the expectations written inline in the file.
//
//   golden_runner [--update] PATH...   run (or rewrite) the files under PATH
//   golden_runner --kinds PATH...      check every diagnostic kind is expected somewhere
//
// Run it from the repository root: diagnostics name files relative to it.
#include <pthread.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <stdexcept>

#include "meshflow/meshflow.h"
#include "tests/golden/GoldenFile.h"

namespace meshflow::golden {
namespace {

namespace fs = std::filesystem;

struct Options {
  bool update = false;
  bool kinds = false;
  std::vector<fs::path> paths;
};

// Files whose name starts with `_` are helpers that tests import, not tests.
bool isGoldenFile(const fs::path& path) {
  return path.extension() == ".mesh" && path.filename().string().rfind('_', 0) != 0;
}

std::vector<fs::path> collectFiles(const std::vector<fs::path>& paths) {
  std::vector<fs::path> files;
  for (const auto& path : paths) {
    if (!fs::is_directory(path)) {
      files.push_back(path);
      continue;
    }
    for (const auto& entry : fs::recursive_directory_iterator(path))
      if (entry.is_regular_file() && isGoldenFile(entry.path())) files.push_back(entry.path());
  }
  for (auto& file : files) file = fs::absolute(file).lexically_normal().lexically_relative(fs::current_path());
  std::sort(files.begin(), files.end());
  return files;
}

// Absolute paths (of imported modules, in messages) are written relative to the
// repository root, and the root itself as `.`, so the expectations hold on every
// machine.
std::string relativeToRoot(std::string text) {
  const std::string root = fs::current_path().string();
  for (std::size_t at; (at = text.find(root + "/")) != std::string::npos;)
    text.erase(at, root.size() + 1);
  for (std::size_t at; (at = text.find(root)) != std::string::npos;)
    text.replace(at, root.size(), ".");
  return text;
}

// Host functions the golden files may call, to test the embedding API's paths.
void defineHostFunctions(Interpreter& interpreter) {
  interpreter.defineFunction("host_fail", {"message"}, [](HostCall& call) -> Value {
    throw std::runtime_error(call[0].str());
  });
  interpreter.defineFunction("host_twice", {"value"}, [](HostCall& call) {
    if (!call[0].isInt()) throw ScriptError(DiagnosticKind::TypeMismatch, "host_twice needs an int");
    return Value::integer(2 * call[0].asInt());
  });
  // As a host's Ctrl-C handler would: the script stops at its next step.
  interpreter.defineFunction("host_interrupt", {}, [&interpreter](HostCall&) {
    interpreter.interrupt();
    return Value();
  });
}

// Scripts may read anything under the tests/golden folder that holds `file`.
fs::path goldenRoot(const fs::path& file) {
  fs::path folder = fs::absolute(file).parent_path();
  for (fs::path up = folder; up.has_relative_path(); up = up.parent_path())
    if (up.filename() == "golden") return up;
  return folder;
}

Outcome run(const fs::path& file, const Expectations& expected) {
  std::string output;
  Config config;
  config.write = [&output](std::string_view text) { output += text; };
  config.limits = expected.limits;
  config.files.readRoots.push_back(goldenRoot(file).string());
  Interpreter interpreter(config);
  defineHostFunctions(interpreter);
  Status status = expected.checkOnly ? interpreter.checkFile(file.string())
                                     : interpreter.evalFile(file.string());
  Outcome outcome;
  outcome.output = splitLines(relativeToRoot(output));
  outcome.errors = splitLines(relativeToRoot(renderAll(status.diagnostics)));
  outcome.exitStatus = status.ok ? 0 : 1;
  return outcome;
}

// A line diff (longest common subsequence): `-` expected only, `+` actual only.
std::vector<std::string> diff(const std::vector<std::string>& expected,
                              const std::vector<std::string>& actual) {
  std::size_t n = expected.size(), m = actual.size();
  std::vector<std::vector<std::size_t>> common(n + 1, std::vector<std::size_t>(m + 1, 0));
  for (std::size_t i = n; i-- > 0;)
    for (std::size_t j = m; j-- > 0;)
      common[i][j] = expected[i] == actual[j] ? common[i + 1][j + 1] + 1
                                              : std::max(common[i + 1][j], common[i][j + 1]);
  std::vector<std::string> lines;
  std::size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && expected[i] == actual[j]) {
      ++i, ++j;
    } else if (i < n && (j == m || common[i + 1][j] >= common[i][j + 1])) {
      lines.push_back("  - " + expected[i++]);
    } else {
      lines.push_back("  + " + actual[j++]);
    }
  }
  return lines;
}

// Every way `actual` differs from `expected`, as printable lines; empty if none.
std::vector<std::string> compare(const Expectations& expected, const Outcome& actual) {
  std::vector<std::string> report;
  for (const auto& problem : expected.problems) report.push_back("  malformed: " + problem);
  if (expected.output != actual.output) {
    report.push_back("  output differs (- expected, + actual):");
    for (auto& line : diff(expected.output, actual.output)) report.push_back(line);
  }
  if (expected.errors != actual.errors) {
    report.push_back("  diagnostics differ (- expected, + actual):");
    for (auto& line : diff(expected.errors, actual.errors)) report.push_back(line);
  }
  if (expected.expectedExit() != actual.exitStatus)
    report.push_back("  exit status " + std::to_string(actual.exitStatus) + ", expected " +
                     std::to_string(expected.expectedExit()));
  return report;
}

bool writeFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  return static_cast<bool>(out);
}

// Rewriting can move lines and so the locations in the diagnostics; rerun
// until the file no longer changes.
bool updateFile(const fs::path& path) {
  for (int round = 0; round < 4; ++round) {
    auto file = GoldenFile::load(path);
    if (!file) return false;
    std::string before = file->text();
    file->update(run(path, file->expectations()));
    if (file->text() == before) return true;
    if (!writeFile(path, file->text())) return false;
    std::cout << "updated " << path.string() << "\n";
  }
  return false;
}

bool testFile(const fs::path& path, bool update) {
  if (update && !updateFile(path)) {
    std::cout << "FAIL " << path.string() << ": could not update\n";
    return false;
  }
  auto file = GoldenFile::load(path);
  if (!file) {
    std::cout << "FAIL " << path.string() << ": cannot read\n";
    return false;
  }
  Expectations expected = file->expectations();
  std::vector<std::string> report = compare(expected, run(path, expected));
  if (report.empty()) return true;
  std::cout << "FAIL " << path.string() << "\n";
  for (const auto& line : report) std::cout << line << "\n";
  return false;
}

// The `[Kind]` at the end of an expected `... error: message [Kind]` line.
std::optional<std::string> expectedKind(const std::string& line) {
  if (line.find(": error: ") == std::string::npos || line.empty() || line.back() != ']')
    return std::nullopt;
  auto open = line.rfind('[');
  if (open == std::string::npos) return std::nullopt;
  return line.substr(open + 1, line.size() - open - 2);
}

int checkKinds(const std::vector<fs::path>& files) {
  std::set<std::string> expected;
  for (const auto& path : files)
    if (auto file = GoldenFile::load(path))
      for (const auto& line : file->expectations().errors)
        if (auto kind = expectedKind(line)) expected.insert(*kind);
  int passed = 0, failed = 0;
  for (DiagnosticKind kind : allDiagnosticKinds()) {
    std::string name(kindName(kind));
    if (expected.count(name)) {
      ++passed;
      continue;
    }
    ++failed;
    std::cout << "FAIL kind " << name << ": no golden file expects a [" << name << "] diagnostic\n";
  }
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

std::optional<Options> parseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--update") options.update = true;
    else if (arg == "--kinds") options.kinds = true;
    else if (!arg.empty() && arg[0] == '-') return std::nullopt;
    else options.paths.emplace_back(arg);
  }
  if (options.paths.empty()) return std::nullopt;
  return options;
}

}  // namespace
}  // namespace meshflow::golden

namespace {

// Scripts run on a thread with a large stack: the call-depth goldens expect
// the default limit of 1000 calls to be reached before the native stack guard,
// also under AddressSanitizer, whose frames are several times larger.
int runOnLargeStack(int (*body)(int, char**), int argc, char** argv) {
  struct Call {
    int (*body)(int, char**);
    int argc;
    char** argv;
    int result;
  } call{body, argc, argv, 1};
  pthread_attr_t attributes;
  pthread_attr_init(&attributes);
  pthread_attr_setstacksize(&attributes, std::size_t{512} << 20);
  pthread_t thread;
  auto entry = [](void* data) -> void* {
    auto* c = static_cast<Call*>(data);
    c->result = c->body(c->argc, c->argv);
    return nullptr;
  };
  if (pthread_create(&thread, &attributes, entry, &call) != 0) return body(argc, argv);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attributes);
  return call.result;
}

int runGolden(int argc, char** argv) {
  using namespace meshflow::golden;
  auto options = parseOptions(argc, argv);
  if (!options) {
    std::cerr << "usage: golden_runner [--update | --kinds] PATH...  (run from the repository root)\n";
    return 2;
  }
  auto files = collectFiles(options->paths);
  if (options->kinds) return checkKinds(files);
  int passed = 0, failed = 0;
  for (const auto& file : files) (testFile(file, options->update) ? passed : failed)++;
  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return runOnLargeStack(runGolden, argc, argv); }
