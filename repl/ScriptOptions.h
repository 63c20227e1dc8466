// Command-line options shared by `run`, `check` and `repl`: file access and limits.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "meshflow/meshflow.h"
#include "repl/Commands.h"

namespace meshflow::cli {

struct ScriptOptions {
  Config config;
  std::string file;  // empty when none was given
  bool help = false;
  /// Where train() runs plans: "cpu" (threads of this process), "mpi" (one
  /// process per device) or "cuda" (docs/distributed.md).
  std::string backend = "cpu";
  /// How long a device of the mpi backend waits for a peer before it fails.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
};

/// Parses `args`; on a usage error writes it to `err` and returns nullopt.
/// `wantsFile` says whether a script path is expected.
std::optional<ScriptOptions> parseScriptOptions(Args args, bool wantsFile, std::ostream& err);

/// A positive number of seconds, at most a million (`--time-budget`, `--timeout`).
std::optional<double> parseSeconds(const std::string& text);

/// The option lines of `--help` for these options.
const char* scriptOptionsHelp();

/// Default file access: read the script's folder and the current folder, write
/// the current folder (plus what --allow-read / --allow-write added).
void applyDefaultFileAccess(ScriptOptions& options);

}  // namespace meshflow::cli
