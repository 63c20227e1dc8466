// Levenshtein distance between names, for "did you mean" suggestions.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace meshflow::ir {

/// Insertions, deletions and substitutions that turn `a` into `b`.
inline std::size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// The candidate `name` is likely a typo of: the nearest within one edit for
/// names of up to three characters, two otherwise (the first of equals);
/// empty when none is that near.
inline std::string nearestName(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t bestDistance = name.size() <= 3 ? 1 : 2;
  for (const std::string& candidate : candidates) {
    std::size_t distance = editDistance(name, candidate);
    if (distance <= bestDistance && (best.empty() || distance < bestDistance)) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

}  // namespace meshflow::ir
