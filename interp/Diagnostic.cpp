#include "meshflow/Diagnostic.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace meshflow {
namespace {

constexpr std::string_view kNames[] = {
#define MESHFLOW_DIAGNOSTIC(name, description) #name,
#include "meshflow/DiagnosticKinds.def"
#undef MESHFLOW_DIAGNOSTIC
};

constexpr std::string_view kDescriptions[] = {
#define MESHFLOW_DIAGNOSTIC(name, description) description,
#include "meshflow/DiagnosticKinds.def"
#undef MESHFLOW_DIAGNOSTIC
};

// The caret line keeps the tabs of the source line so the caret lands under
// the right character whatever the terminal's tab width.
std::string caretLine(const std::string& source, std::uint32_t column, std::uint32_t length) {
  std::string line;
  for (std::uint32_t i = 0; i < column; ++i)
    line += (i < source.size() && source[i] == '\t') ? '\t' : ' ';
  line += '^';
  if (length > 1) line.append(length - 1, '~');
  return line;
}

// Columns count UTF-8 code points; the caret line is built in code points too.
std::string asciiShadow(const std::string& source) {
  std::string shadow;
  for (unsigned char c : source)
    if ((c & 0xC0) != 0x80) shadow += (c == '\t') ? '\t' : 'x';
  return shadow;
}

// A long source line is shown as a window around the caret.
constexpr std::uint32_t kMaxShownColumns = 140;

struct ShownLine {
  std::string text;
  std::uint32_t column;
};

ShownLine window(const std::string& line, std::uint32_t column) {
  std::vector<std::size_t> starts;  // byte offset of each code point
  for (std::size_t i = 0; i < line.size(); ++i)
    if ((static_cast<unsigned char>(line[i]) & 0xC0) != 0x80) starts.push_back(i);
  if (starts.size() <= kMaxShownColumns) return {line, column};
  std::uint32_t first = column > 40 ? column - 40 : 0;
  first = std::min<std::uint32_t>(first, static_cast<std::uint32_t>(starts.size()) - kMaxShownColumns);
  std::size_t begin = starts[first];
  std::size_t last = first + kMaxShownColumns;
  std::size_t end = last < starts.size() ? starts[last] : line.size();
  std::string text = (first > 0 ? "..." : "") + line.substr(begin, end - begin) +
                     (end < line.size() ? "..." : "");
  return {text, column - first + (first > 0 ? 3 : 0)};
}

void renderInto(const Diagnostic& d, std::string& out) {
  const char* severity = d.severity == Severity::Error ? "error" : "note";
  if (!d.hasLocation()) {
    out += fmt::format("meshflow: {}: {} [{}]\n", severity, d.message, kindName(d.kind));
  } else {
    out += fmt::format("{}:{}:{}: {}: {}", d.file, d.line + 1, d.column + 1, severity, d.message);
    if (d.severity == Severity::Error) out += fmt::format(" [{}]", kindName(d.kind));
    out += '\n';
    if (!d.sourceLine.empty()) {
      ShownLine shown = window(d.sourceLine, d.column);
      std::uint32_t length = std::min(d.length, kMaxShownColumns);
      out += shown.text + '\n';
      out += caretLine(asciiShadow(shown.text), shown.column, length) + '\n';
    }
  }
  for (const auto& note : d.notes) renderInto(note, out);
}

}  // namespace

std::string_view kindName(DiagnosticKind kind) { return kNames[static_cast<int>(kind)]; }

std::string_view kindDescription(DiagnosticKind kind) {
  return kDescriptions[static_cast<int>(kind)];
}

const std::vector<DiagnosticKind>& allDiagnosticKinds() {
  static const std::vector<DiagnosticKind> kinds = [] {
    std::vector<DiagnosticKind> all;
    for (std::size_t i = 0; i < std::size(kNames); ++i) all.push_back(static_cast<DiagnosticKind>(i));
    return all;
  }();
  return kinds;
}

std::string Diagnostic::render() const {
  std::string out;
  renderInto(*this, out);
  return out;
}

std::string renderAll(const std::vector<Diagnostic>& diagnostics) {
  std::string out;
  for (const auto& d : diagnostics) renderInto(d, out);
  return out;
}

}  // namespace meshflow
