// The lexer of DirectParser (internal to grammar/): the tokens of Mesh.g4's
// lexer rules, found by hand. It only needs to be right for sources that lex
// cleanly; where ANTLR's lexer would make an error token (a character no rule
// matches, a string left open) it gives up and the ANTLR front end reports it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace meshflow::grammar {

enum class TokenKind : std::uint8_t {
  Newline,
  Ident,
  Int,
  Float,
  Quantity,
  String,
  Symbol,  // a keyword or punctuation, told apart by its text
  End,
};

struct Token {
  TokenKind kind;
  std::string_view text;   // a view of the source
  std::uint32_t line;      // from 0
  std::uint32_t column;    // in code points, from 0
  std::uint32_t width;     // code points of `text`
};

/// The tokens of `source` (valid UTF-8), without blanks, comments and line
/// continuations, or nothing where ANTLR's lexer would make an error token.
std::optional<std::vector<Token>> scan(std::string_view source);

}  // namespace meshflow::grammar
