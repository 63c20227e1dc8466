#include "interp/SourceFile.h"

namespace meshflow::interp {
namespace {

std::uint32_t codePointCount(std::string_view text) {
  std::uint32_t count = 0;
  for (unsigned char c : text) count += (c & 0xC0) != 0x80;
  return count;
}

// The source line with malformed UTF-8 bytes shown as '?', so a diagnostic
// about garbage input is itself readable.
std::string printable(std::string_view line) {
  std::string out;
  for (std::size_t i = 0; i < line.size();) {
    auto byte = static_cast<unsigned char>(line[i]);
    std::size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3
                                         : (byte >> 3) == 0x1E ? 4 : 0;
    bool ok = length > 0 && i + length <= line.size();
    for (std::size_t k = 1; ok && k < length; ++k)
      ok = (static_cast<unsigned char>(line[i + k]) & 0xC0) == 0x80;
    if (!ok) {
      out += '?';
      ++i;
      continue;
    }
    out.append(line.substr(i, length));
    i += length;
  }
  return out;
}

}  // namespace

SourceFile::SourceFile(std::string name, std::string text)
    : name_(std::move(name)), text_(std::move(text)) {
  lineStarts_.push_back(0);
  for (std::size_t i = 0; i < text_.size(); ++i)
    if (text_[i] == '\n') lineStarts_.push_back(i + 1);
}

std::string_view SourceFile::line(std::uint32_t index) const {
  if (index >= lineStarts_.size()) return {};
  std::size_t begin = lineStarts_[index];
  std::size_t end = index + 1 < lineStarts_.size() ? lineStarts_[index + 1] - 1 : text_.size();
  if (end > begin && text_[end - 1] == '\r') --end;
  return std::string_view(text_).substr(begin, end - begin);
}

SourceSpan SourceSpan::cover(const SourceSpan& first, const SourceSpan& last) {
  SourceSpan span = first;
  span.endLine = last.endLine;
  span.endColumn = last.endColumn;
  return span;
}

Diagnostic makeDiagnostic(DiagnosticKind kind, std::string message, const SourceSpan& span,
                          Severity severity) {
  Diagnostic d;
  d.severity = severity;
  d.kind = kind;
  d.message = std::move(message);
  if (!span.valid()) return d;
  d.file = span.file->name();
  d.line = span.line;
  d.column = span.column;
  d.sourceLine = printable(span.file->line(span.line));
  // A span that runs past its first line is underlined to the end of that line.
  std::uint32_t end = span.endLine == span.line ? span.endColumn : codePointCount(d.sourceLine);
  d.length = end > span.column ? end - span.column : 1;
  return d;
}

}  // namespace meshflow::interp
