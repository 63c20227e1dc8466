// What the REPL shows after a line or a command.
#pragma once

#include <string>

namespace meshflow::cli {

/// Script output (`print`) does not pass through here: it goes to the
/// Config's `write` callback as it happens.
struct ReplReply {
  std::string output;       // values and command text, for standard output
  std::string diagnostics;  // rendered in full, for standard error
  bool quit = false;        // `:quit` was entered
};

}  // namespace meshflow::cli
