#include "ir/ScopeGlob.h"

namespace meshflow::ir {

// Iterative matching with backtracking to the last `*`: linear in practice and
// never recursive, so a long pattern cannot exhaust the stack.
bool scopeMatches(std::string_view pattern, std::string_view scope) {
  std::size_t p = 0, s = 0;
  std::size_t star = std::string_view::npos, resume = 0;
  while (s < scope.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = s;
    } else if (p < pattern.size() && pattern[p] == scope[s]) {
      ++p;
      ++s;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      s = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace meshflow::ir
