#include "ir/ScopeGlob.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

#include "ir/EditDistance.h"

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

namespace {

// `block3.mlp.fc1` as `block*.mlp.fc1`.
std::string digitsAsStar(std::string_view scope) {
  std::string out;
  for (std::size_t i = 0; i < scope.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(scope[i]))) {
      out += scope[i];
      continue;
    }
    out += '*';
    while (i + 1 < scope.size() && std::isdigit(static_cast<unsigned char>(scope[i + 1]))) ++i;
  }
  return out;
}

}  // namespace

std::vector<std::string> nearestScopes(std::string_view pattern,
                                       const std::vector<std::string>& scopes, std::size_t count) {
  const bool glob = pattern.find('*') != std::string_view::npos;
  const std::size_t within = std::max<std::size_t>(2, pattern.size() / 3);
  std::set<std::pair<std::size_t, std::string>> ranked;
  for (const std::string& scope : scopes) {
    std::string name = glob ? digitsAsStar(scope) : scope;
    std::size_t distance = editDistance(pattern, name);
    if (distance <= within) ranked.insert({distance, std::move(name)});
  }
  std::vector<std::string> out;
  for (const auto& [distance, name] : ranked) {
    if (out.size() == count) break;
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

}  // namespace meshflow::ir
