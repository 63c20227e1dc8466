// Newline handling between the lexer and the parser (internal to grammar/).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "antlr4-runtime.h"

namespace meshflow::grammar {

struct FilterProblem {
  const antlr4::Token* token;  // where nesting went too deep
};

/// Drops the NEWLINE tokens that cannot end a statement: inside parentheses,
/// brackets and record braces, after a token that needs a right operand, and
/// before `else`; collapses runs of newlines. Returns the problem token if
/// brackets nest deeper than kMaxNesting.
std::optional<FilterProblem> filterNewlines(std::vector<std::unique_ptr<antlr4::Token>>& tokens,
                                            std::vector<std::unique_ptr<antlr4::Token>>& out);

}  // namespace meshflow::grammar
