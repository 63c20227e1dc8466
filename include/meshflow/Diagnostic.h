// Diagnostics: the one channel through which user errors reach a host.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace meshflow {

enum class DiagnosticKind : std::uint8_t {
#define MESHFLOW_DIAGNOSTIC(name, description) name,
#include "meshflow/DiagnosticKinds.def"
#undef MESHFLOW_DIAGNOSTIC
};

/// The kind's name as printed in brackets after the message (`SyntaxError`).
std::string_view kindName(DiagnosticKind kind);
/// One sentence saying what the kind means.
std::string_view kindDescription(DiagnosticKind kind);
/// Every kind, in declaration order.
const std::vector<DiagnosticKind>& allDiagnosticKinds();

enum class Severity : std::uint8_t { Error, Note };

/// A located message. Positions are stored 0-based and printed 1-based.
/// A diagnostic owns a copy of its source line, so it outlives the source.
struct Diagnostic {
  Severity severity = Severity::Error;
  DiagnosticKind kind = DiagnosticKind::SyntaxError;
  std::string message;
  std::string file;        // empty when the error has no source location
  std::uint32_t line = 0;  // 0-based
  std::uint32_t column = 0;
  std::uint32_t length = 1;  // caret width on `line`
  std::string sourceLine;
  std::vector<Diagnostic> notes;

  bool hasLocation() const { return !file.empty(); }
  /// `file:line:col: error: message [Kind]`, the source line, a caret line, then the notes.
  std::string render() const;
};

std::string renderAll(const std::vector<Diagnostic>& diagnostics);

}  // namespace meshflow
