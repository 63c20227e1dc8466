// Glob patterns over op scopes, as schedule pins and `explain` use them:
// `block*.mlp.fc1` matches `block3.mlp.fc1`. `*` matches any run of characters
// (dots included), every other character itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace meshflow::ir {

/// Whether `scope` matches `pattern` as a whole.
bool scopeMatches(std::string_view pattern, std::string_view scope);

/// Up to `count` of `scopes` nearest to `pattern` for a "did you mean": each
/// scope with its runs of digits written `*` (`block3.mlp.fc1` as
/// `block*.mlp.fc1`) when the pattern has a `*`, ranked by edit distance and
/// then by name, without repeats; only those within a third of the pattern's
/// length.
std::vector<std::string> nearestScopes(std::string_view pattern,
                                       const std::vector<std::string>& scopes, std::size_t count = 3);

}  // namespace meshflow::ir
