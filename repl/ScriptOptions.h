// Command-line options shared by `run`, `check` and `repl`: file access and limits.
#pragma once

#include <optional>
#include <string>

#include "meshflow/meshflow.h"
#include "repl/Commands.h"

namespace meshflow::cli {

struct ScriptOptions {
  Config config;
  std::string file;  // empty when none was given
  bool help = false;
};

/// Parses `args`; on a usage error writes it to `err` and returns nullopt.
/// `wantsFile` says whether a script path is expected.
std::optional<ScriptOptions> parseScriptOptions(Args args, bool wantsFile, std::ostream& err);

/// The option lines of `--help` for these options.
const char* scriptOptionsHelp();

/// Default file access: read the script's folder and the current folder, write
/// the current folder (plus what --allow-read / --allow-write added).
void applyDefaultFileAccess(ScriptOptions& options);

}  // namespace meshflow::cli
