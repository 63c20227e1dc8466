#include "repl/TerminalStyle.h"

#include <unistd.h>

#include <cstdlib>

namespace meshflow::cli {
namespace {

constexpr std::string_view kRed = "\x1b[1;31m", kCyan = "\x1b[1;36m", kReset = "\x1b[0m";

// Colours `word` (`error:`, `note:`) where a line starts with it or where it
// follows a location (`file:1:2: error:`).
std::string colourWord(std::string text, std::string_view word, std::string_view colour) {
  std::string styled = std::string(colour) + std::string(word) + std::string(kReset);
  for (std::size_t at = 0; (at = text.find(word, at)) != std::string::npos;) {
    bool lineStart = at == 0 || text[at - 1] == '\n';
    bool afterLocation = at >= 2 && text.compare(at - 2, 2, ": ") == 0;
    if (lineStart || afterLocation) {
      text.replace(at, word.size(), styled);
      at += styled.size();
    } else {
      at += word.size();
    }
  }
  return text;
}

}  // namespace

bool colourFor(int fd) {
  const char* noColor = std::getenv("NO_COLOR");
  const char* term = std::getenv("TERM");
  if (noColor != nullptr && noColor[0] != '\0') return false;
  if (term == nullptr || std::string_view(term) == "dumb") return false;
  return isatty(fd) != 0;
}

std::string coloured(std::string_view diagnostics) {
  return colourWord(colourWord(std::string(diagnostics), "error:", kRed), "note:", kCyan);
}

std::string styledFor(int fd, std::string_view diagnostics) {
  return colourFor(fd) ? coloured(diagnostics) : std::string(diagnostics);
}

}  // namespace meshflow::cli
