// The REPL without a terminal: a line goes in, what to print comes out. The
// libedit front end (ReplCommand.cpp) only reads lines and shows replies, so
// everything the REPL decides is unit-tested here (tests/unit/repl/).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meshflow/meshflow.h"
#include "repl/PlanExplorer.h"
#include "repl/ReplReply.h"

namespace meshflow::cli {

/// What TAB may put in place of the word before the cursor.
struct ReplCompletion {
  /// How many characters before the cursor the candidates replace (the part of
  /// the word after its last dot).
  std::size_t wordLength = 0;
  std::vector<std::string> candidates;  // sorted, unique
  /// The longest common prefix of the candidates: what TAB can insert at once.
  std::string commonPrefix;
};

class ReplSession {
 public:
  static constexpr const char* kPrompt = "mesh> ";
  static constexpr const char* kContinuationPrompt = "...> ";
  /// The name diagnostics give to REPL input.
  static constexpr const char* kSourceName = "<repl>";

  /// At the prompt a definition may replace an earlier one of its name (a
  /// note says so): the session sets Config::allowRedefinition.
  explicit ReplSession(Config config = {});

  /// Takes one line without its newline. A complete input runs and its value
  /// (if any) and diagnostics come back; an unfinished one (an open bracket or
  /// block, a trailing operator) is kept until a later line completes it.
  ReplReply feed(std::string_view line);
  /// At the end of the input: runs whatever is still pending, so a truncated
  /// input reports its syntax error instead of vanishing.
  ReplReply finish();
  /// Drops the pending unfinished input (Ctrl-C at a continuation prompt).
  void cancel() { pending_.clear(); }
  /// Stops what runs now at its next step (Ctrl-C while it runs); what it
  /// defined before stays. Safe from a signal handler.
  void interrupt() { interpreter_->interrupt(); }

  /// True while an unfinished input waits for more lines.
  bool continuing() const { return !pending_.empty(); }
  const char* prompt() const { return continuing() ? kContinuationPrompt : kPrompt; }

  /// Completions for the word ending at `cursor`: REPL commands after a leading
  /// `:`, otherwise meshflow::complete (keywords, names in scope, members).
  ReplCompletion complete(std::string_view line, std::size_t cursor) const;

  /// The text `:help` prints.
  static std::string helpText();

  Interpreter& interpreter() { return *interpreter_; }

 private:
  ReplReply command(std::string_view command);
  ReplReply run(bool atEnd);
  ReplReply load(const std::string& file, const char* verb);
  ReplReply save(const std::string& file) const;
  void reset();

  Config config_;  // for :reset
  std::unique_ptr<Interpreter> interpreter_;
  PlanExplorer explorer_;
  std::string pending_;              // lines of an unfinished input, joined by newlines
  std::vector<std::string> inputs_;  // inputs that ran without error, for :save
  std::string loaded_;               // the script :load ran last, for :reload
};

}  // namespace meshflow::cli
