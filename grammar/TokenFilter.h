// Newline handling between a lexer and the parser (internal to grammar/).
// Both front ends (ANTLR's and DirectParser's) filter their tokens here, so
// that they agree on where statements end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace meshflow::grammar {

/// What the filter needs to know of one token: what it is, in bits (below).
struct FilterToken {
  std::uint16_t roles = 0;
};

/// The filter's view of a token: a NEWLINE, a STRING, or other text.
FilterToken filterToken(bool newline, bool string, std::string_view text);

struct FilterProblem {
  enum class Kind {
    TooDeep,   // brackets nest deeper than kMaxNesting; `token` is where
    Unclosed,  // a statement starts inside brackets; `token` is the bracket left open
  };
  Kind kind;
  std::size_t token;  // an index into the filter's input
};

struct FilteredTokens {
  std::vector<std::size_t> kept;  // indices of the tokens the parser sees, in order
  std::optional<FilterProblem> problem;
  /// The innermost bracket or brace still open at the end of the input.
  std::optional<std::size_t> openAtEnd;
};

/// Drops the NEWLINE tokens that cannot end a statement: inside parentheses,
/// brackets and record braces, after a token that needs a right operand, and
/// before `else`; collapses runs of newlines. Stops at the first problem.
FilteredTokens filterNewlines(const std::vector<FilterToken>& tokens);

}  // namespace meshflow::grammar
