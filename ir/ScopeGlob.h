// Glob patterns over op scopes, as schedule pins and `explain` use them:
// `block*.mlp.fc1` matches `block3.mlp.fc1`. `*` matches any run of characters
// (dots included), every other character itself.
#pragma once

#include <string_view>

namespace meshflow::ir {

/// Whether `scope` matches `pattern` as a whole.
bool scopeMatches(std::string_view pattern, std::string_view scope);

}  // namespace meshflow::ir
