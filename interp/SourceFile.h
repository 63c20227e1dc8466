// A loaded source text and the spans that point into it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "meshflow/Diagnostic.h"

namespace meshflow::interp {

class SourceFile {
 public:
  SourceFile(std::string name, std::string text);

  const std::string& name() const { return name_; }
  const std::string& text() const { return text_; }
  /// The text of 0-based line `index` without its line break ("" past the end).
  std::string_view line(std::uint32_t index) const;

 private:
  std::string name_;
  std::string text_;
  std::vector<std::size_t> lineStarts_;
};

/// A half-open region of a source file; lines and columns 0-based, columns in
/// code points. The file outlives every AST node that points into it.
struct SourceSpan {
  const SourceFile* file = nullptr;
  std::uint32_t line = 0;
  std::uint32_t column = 0;
  std::uint32_t endLine = 0;
  std::uint32_t endColumn = 0;

  bool valid() const { return file != nullptr; }
  /// The span from the start of `first` to the end of `last`.
  static SourceSpan cover(const SourceSpan& first, const SourceSpan& last);
};

/// A diagnostic of `kind` at `span` (or without a location if the span is empty).
Diagnostic makeDiagnostic(DiagnosticKind kind, std::string message, const SourceSpan& span,
                          Severity severity = Severity::Error);

}  // namespace meshflow::interp
