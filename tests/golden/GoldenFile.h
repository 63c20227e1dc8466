// A golden test file: a .mesh script whose whole-line comments say how to run
// it and what it must print (the format is described in tests/golden/README.md).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "meshflow/meshflow.h"

namespace meshflow::golden {

/// What a golden file asks for.
struct Expectations {
  bool checkOnly = false;  // `# mode: check`
  Limits limits;           // `# limits: steps=N calls=N memory=BYTES`
  std::vector<std::string> output;
  std::vector<std::string> errors;  // the rendered diagnostics, line by line
  std::optional<int> exitStatus;    // `# exit: N`; otherwise 1 with errors, 0 without
  std::vector<std::string> problems;  // malformed directives, which fail the file

  int expectedExit() const { return exitStatus.value_or(errors.empty() ? 0 : 1); }
};

/// What running a golden file produced.
struct Outcome {
  std::vector<std::string> output;
  std::vector<std::string> errors;
  int exitStatus = 0;
};

class GoldenFile {
 public:
  static std::optional<GoldenFile> load(const std::filesystem::path& path);

  Expectations expectations() const;
  /// Rewrites the expectations to match `actual`, keeping every other line.
  void update(const Outcome& actual);
  std::string text() const;

  enum class Directive { None, Output, Error, Exit, Mode, Limits, Malformed };
  struct Line {
    Directive directive = Directive::None;
    std::string indent;   // whitespace before the `#` of a directive
    std::string payload;  // the directive's text after `keyword: `
    std::string raw;      // the line as read (used for code and comments)
  };

 private:
  void replaceOrAppend(Directive directive, const std::vector<std::string>& payloads);

  std::vector<Line> lines_;
  bool finalNewline_ = true;
};

/// Splits `text` at newlines; a final newline does not start another line.
std::vector<std::string> splitLines(const std::string& text);

}  // namespace meshflow::golden
