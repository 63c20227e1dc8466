// The lexer of both front ends (internal to grammar/): the tokens of Mesh.g4's
// lexer rules, found by hand, the same as ANTLR's generated lexer makes (at a
// fraction of its cost), error tokens included. fuzz_parse and
// DirectParserTest compare the two.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "grammar/TokenFilter.h"

namespace meshflow::grammar {

enum class TokenKind : std::uint8_t {
  Newline,
  Ident,
  Int,
  Float,
  Quantity,
  String,
  Symbol,              // a keyword or punctuation: Token::symbol says which
  UnterminatedString,  // a string missing its closing quote, to the end of its line
  UnknownChar,         // one code point no rule matches
  End,
};

/// Mesh.g4's keywords and punctuation. Parsers compare these, not texts: a
/// string comparison is a memcmp, which the fuzzer intercepts.
enum class Sym : std::uint8_t {
  None,  // not a Symbol token
  // keywords
  Import,
  As,
  Let,
  Var,
  Fn,
  Layer,
  Model,
  Cluster,
  Schedule,
  If,
  Else,
  For,
  In,
  While,
  Return,
  Break,
  Continue,
  Or,
  And,
  Not,
  True,
  False,
  NoneWord,
  Auto,
  // punctuation
  Semicolon,
  LeftBrace,
  RightBrace,
  LeftParen,
  RightParen,
  LeftBracket,
  RightBracket,
  Comma,
  Dot,
  DotDot,
  Colon,
  Assign,
  PlusAssign,
  MinusAssign,
  StarAssign,
  SlashAssign,
  Equal,
  NotEqual,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  Plus,
  Minus,
  Star,
  Slash,
  SlashSlash,
  Percent,
  StarStar,
  Count,
};

/// How `symbol` is written (`import`, `+=`).
std::string_view spelling(Sym symbol);

struct Token {
  TokenKind kind;
  Sym symbol;             // for TokenKind::Symbol
  std::string_view text;  // a view of the source
  std::uint32_t line;     // from 0
  std::uint32_t column;   // in code points, from 0
  std::uint32_t width;    // code points of `text`
  std::uint32_t offset;   // in code points from the start of the source
};

/// The tokens of `source` (valid UTF-8), without blanks, comments and line
/// continuations.
std::vector<Token> scan(std::string_view source);
/// True for the tokens that are errors (UnterminatedString, UnknownChar).
bool isError(const Token& token);
/// What TokenFilter needs of each token.
std::vector<FilterToken> filterView(const std::vector<Token>& tokens);

}  // namespace meshflow::grammar
