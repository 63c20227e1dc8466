// Tab completion for the REPL, as a plain function so it is tested without a terminal.
#include <algorithm>
#include <cctype>

#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

constexpr const char* kKeywords[] = {
    "and", "as", "auto", "break", "cluster", "continue", "else", "false", "fn", "for", "if",
    "import", "in", "layer", "let", "model", "none", "not", "or", "return", "schedule", "true",
    "var", "while"};

bool isWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

}  // namespace

std::vector<std::string> complete(const Interpreter& interpreter, std::string_view line,
                                  std::size_t cursor) {
  cursor = std::min(cursor, line.size());
  std::size_t start = cursor;
  while (start > 0 && isWordChar(line[start - 1])) --start;
  std::string word(line.substr(start, cursor - start));
  std::vector<std::string> candidates;
  std::string prefix = word;
  auto dot = word.rfind('.');
  if (dot != std::string::npos) {
    prefix = word.substr(dot + 1);
    candidates = interpreter.memberNames(word.substr(0, dot));
  } else {
    candidates = interpreter.globalNames();
    candidates.insert(candidates.end(), std::begin(kKeywords), std::end(kKeywords));
  }
  std::vector<std::string> matches;
  for (const auto& candidate : candidates)
    if (candidate.rfind(prefix, 0) == 0) matches.push_back(candidate);
  std::sort(matches.begin(), matches.end());
  matches.erase(std::unique(matches.begin(), matches.end()), matches.end());
  return matches;
}

}  // namespace meshflow
