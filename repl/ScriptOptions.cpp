#include "repl/ScriptOptions.h"

#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <ostream>

#include "repl/ProgressLine.h"

namespace meshflow::cli {
namespace {

template <typename Number>
bool parseNumber(const std::string& text, Number& out) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size() && out > 0;
}

// Accepts plain bytes or a suffix: 512MB, 8GB, 2GiB.
bool parseBytes(const std::string& text, std::size_t& out) {
  static const std::pair<const char*, double> kSuffixes[] = {
      {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0}, {"GB", 1e9},
      {"MB", 1e6},           {"KB", 1e3},        {"B", 1}};
  for (const auto& [suffix, scale] : kSuffixes) {
    std::string s(suffix);
    if (text.size() > s.size() && text.compare(text.size() - s.size(), s.size(), s) == 0) {
      double value = 0;
      auto digits = text.substr(0, text.size() - s.size());
      auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (error != std::errc() || end != digits.data() + digits.size() || !(value > 0)) return false;
      out = static_cast<std::size_t>(value * scale);
      return true;
    }
  }
  return parseNumber(text, out);
}

}  // namespace

std::optional<double> parseSeconds(const std::string& text) {
  double seconds = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (error != std::errc() || end != text.data() + text.size() || !(seconds > 0) || seconds > 1e6)
    return std::nullopt;
  return seconds;
}

const char* scriptOptionsHelp() {
  return "  --allow-read DIR      let the script read files under DIR (repeatable)\n"
         "  --allow-write DIR     let the script write files under DIR (repeatable)\n"
         "  -I, --import-path DIR search DIR for imports (repeatable)\n"
         "  --stdlib DIR          use the .mesh standard library in DIR\n"
         "  --max-steps N         stop after N evaluation steps (default 100000000)\n"
         "  --max-call-depth N    stop when calls nest deeper than N (default 1000)\n"
         "  --max-memory BYTES    stop when values hold more than BYTES, e.g. 2GB (default 4GiB)\n"
         "  --time-budget SECONDS stop a planning that runs longer with a TimeBudget error\n"
         "                        (default 300)\n"
         "  --backend NAME        where train() runs plans: cpu (default: threads of this\n"
         "                        process), mpi (one process per device, under mpirun or\n"
         "                        srun), cuda\n"
         "  --timeout SECONDS     mpi: how long a device waits for a peer before the run\n"
         "                        stops with an error (default 300)\n"
         "  -h, --help            show this help\n"
         "\nBy default a script may read files under its own folder and the current\n"
         "folder, and write files under the current folder.\n";
}

std::optional<ScriptOptions> parseScriptOptions(Args args, bool wantsFile, std::ostream& err) {
  ScriptOptions options;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    auto value = [&]() -> const std::string* {
      if (i + 1 < args.size()) return &args[++i];
      err << "meshflow: " << arg << " needs a value\n";
      return nullptr;
    };
    auto bad = [&](const std::string& v) {
      err << "meshflow: invalid value '" << v << "' for " << arg << "\n";
      return std::nullopt;
    };
    if (arg == "-h" || arg == "--help") {
      options.help = true;
    } else if (arg == "--allow-read" || arg == "--allow-write" || arg == "-I" ||
               arg == "--import-path" || arg == "--stdlib") {
      const std::string* v = value();
      if (!v) return std::nullopt;
      if (arg == "--allow-read") options.config.files.readRoots.push_back(*v);
      else if (arg == "--allow-write") options.config.files.writeRoots.push_back(*v);
      else if (arg == "--stdlib") options.config.stdlibDir = *v;
      else options.config.importRoots.push_back(*v);
    } else if (arg == "--max-steps") {
      const std::string* v = value();
      if (!v || !parseNumber(*v, options.config.limits.maxSteps)) return v ? bad(*v) : std::nullopt;
    } else if (arg == "--max-call-depth") {
      const std::string* v = value();
      if (!v || !parseNumber(*v, options.config.limits.maxCallDepth)) return v ? bad(*v) : std::nullopt;
    } else if (arg == "--max-memory") {
      const std::string* v = value();
      if (!v || !parseBytes(*v, options.config.limits.maxMemoryBytes)) return v ? bad(*v) : std::nullopt;
    } else if (arg == "--backend") {
      const std::string* v = value();
      if (!v) return std::nullopt;
      if (*v != "cpu" && *v != "mpi" && *v != "cuda") return bad(*v);
      options.backend = *v;
    } else if (arg == "--timeout" || arg == "--time-budget") {
      const std::string* v = value();
      if (!v) return std::nullopt;
      std::optional<double> seconds = parseSeconds(*v);
      if (!seconds) return bad(*v);
      if (arg == "--time-budget") options.config.limits.timeBudgetSeconds = *seconds;
      else options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(*seconds * 1000));
    } else if (!arg.empty() && arg[0] == '-' && arg != "-") {
      err << "meshflow: unknown option '" << arg << "'\n";
      return std::nullopt;
    } else if (wantsFile && options.file.empty()) {
      options.file = arg;
    } else {
      err << "meshflow: unexpected argument '" << arg << "'\n";
      return std::nullopt;
    }
  }
  if (wantsFile && options.file.empty() && !options.help) {
    err << "meshflow: no script given\n";
    return std::nullopt;
  }
  options.config.planProgress = progressLineFor(STDERR_FILENO);
  return options;
}

void applyDefaultFileAccess(ScriptOptions& options) {
  namespace fs = std::filesystem;
  auto& files = options.config.files;
  files.readRoots.push_back(fs::current_path().string());
  if (!options.file.empty()) {
    fs::path folder = fs::absolute(options.file).parent_path();
    files.readRoots.push_back(folder.string());
  }
  files.writeRoots.push_back(fs::current_path().string());
}

}  // namespace meshflow::cli
