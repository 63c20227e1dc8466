// Newline handling between the lexer and the parser (internal to grammar/).
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "antlr4-runtime.h"

namespace meshflow::grammar {

struct FilterProblem {
  enum class Kind {
    TooDeep,   // brackets nest deeper than kMaxNesting; `token` is where
    Unclosed,  // a statement starts inside brackets; `token` is the bracket left open
  };
  Kind kind;
  const antlr4::Token* token;
};

/// Drops the NEWLINE tokens that cannot end a statement: inside parentheses,
/// brackets and record braces, after a token that needs a right operand, and
/// before `else`; collapses runs of newlines. Returns a problem found on the
/// way. `openAtEnd` receives the innermost bracket or brace still open at the
/// end of the input (owned by `out`), or nullptr.
std::optional<FilterProblem> filterNewlines(std::vector<std::unique_ptr<antlr4::Token>>& tokens,
                                            std::vector<std::unique_ptr<antlr4::Token>>& out,
                                            const antlr4::Token*& openAtEnd);

}  // namespace meshflow::grammar
