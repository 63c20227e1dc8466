// Reading REPL lines from a terminal with libedit: prompts, editing, history
// and TAB completion. What the REPL does with a line is ReplSession's business.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "repl/ReplSession.h"

namespace meshflow::cli {

class LineEditor {
 public:
  /// Edits standard input on standard output. `historyPath` is loaded now and
  /// rewritten after every line; empty means history in memory only. A file
  /// that cannot be read or written is silently skipped.
  LineEditor(ReplSession& session, std::string historyPath);
  ~LineEditor();
  LineEditor(const LineEditor&) = delete;
  LineEditor& operator=(const LineEditor&) = delete;

  struct Line {
    std::string text;
    bool interrupted = false;  // Ctrl-C: drop the line and any pending input
  };
  /// Reads one line after the session's prompt; nullopt at end of input (Ctrl-D).
  std::optional<Line> read();

  /// `$HOME/.meshflow_history`, or empty when HOME is not set.
  static std::string defaultHistoryPath();

  /// The libedit state; declared here so that libedit's callbacks can reach it.
  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

/// `words` laid out in columns no wider than `width`, one row per line, as a
/// completion list is shown under the input line.
std::string formatColumns(const std::vector<std::string>& words, std::size_t width);

}  // namespace meshflow::cli
