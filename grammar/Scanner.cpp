#include "grammar/Scanner.h"

#include <algorithm>
#include <array>

#include "grammar/AstBuilder.h"

namespace meshflow::grammar {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentPart(char c) { return isIdentStart(c) || isDigit(c); }

constexpr std::array<std::string_view, 24> kKeywords = {
    "import", "as",     "let",   "var",      "fn",   "layer", "model", "cluster",
    "schedule", "if",   "else",  "for",      "in",   "while", "return", "break",
    "continue", "or",   "and",   "not",      "true", "false", "none",  "auto"};

// Mesh.g4's UNIT fragment.
constexpr std::array<std::string_view, 31> kUnits = {
    "B",      "KB",     "MB",     "GB",     "TB",     "PB",    "KiB",   "MiB",
    "GiB",    "TiB",    "b",      "Kb",     "Mb",     "Gb",    "Tb",    "s",
    "ms",     "us",     "ns",     "FLOP",   "KFLOP",  "MFLOP", "GFLOP", "TFLOP",
    "PFLOP",  "FLOPS",  "KFLOPS", "MFLOPS", "GFLOPS", "TFLOPS", "PFLOPS"};

// Punctuation, longest first so that the first match is the longest.
constexpr std::array<std::string_view, 29> kPunctuation = {
    "+=", "-=", "*=", "/=", "==", "!=", "<=", ">=", "..", "**", "//", ";", "{", "}", "(",
    ")",  ",",  ".",  "=",  "<",  ">",  "+",  "-",  "*",  "/",  "%",  "[", "]", ":"};

// Mesh.g4's DIGITS fragment at `i`: its end, or `i` where there is none.
std::size_t digitsEnd(std::string_view s, std::size_t i) {
  if (i >= s.size() || !isDigit(s[i])) return i;
  ++i;
  while (i < s.size()) {
    if (isDigit(s[i])) {
      ++i;
    } else if (s[i] == '_' && i + 1 < s.size() && isDigit(s[i + 1])) {
      i += 2;
    } else {
      break;
    }
  }
  return i;
}

// EXPONENT at `i`: its end, or `i`.
std::size_t exponentEnd(std::string_view s, std::size_t i) {
  if (i >= s.size() || (s[i] != 'e' && s[i] != 'E')) return i;
  std::size_t j = i + 1;
  if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
  std::size_t end = digitsEnd(s, j);
  return end == j ? i : end;
}

// The longest unit at `i`, optionally followed by `/s`: its end, or `i`.
std::size_t unitEnd(std::string_view s, std::size_t i) {
  std::size_t best = 0;
  for (std::string_view unit : kUnits)
    if (unit.size() > best && s.substr(i, unit.size()) == unit) best = unit.size();
  if (best == 0) return i;
  std::size_t end = i + best;
  if (s.substr(end, 2) == "/s") end += 2;
  return end;
}

// INT, FLOAT or QUANTITY at `i` (a digit): the longest match, as ANTLR's lexer takes.
std::pair<TokenKind, std::size_t> number(std::string_view s, std::size_t i) {
  std::size_t end = digitsEnd(s, i);
  TokenKind kind = TokenKind::Int;
  if (end < s.size() && s[end] == '.') {
    std::size_t fraction = digitsEnd(s, end + 1);
    if (fraction > end + 1) {
      end = exponentEnd(s, fraction);
      kind = TokenKind::Float;
    }
  } else if (std::size_t exponent = exponentEnd(s, end); exponent > end) {
    end = exponent;
    kind = TokenKind::Float;
  }
  if (std::size_t unit = unitEnd(s, end); unit > end) return {TokenKind::Quantity, unit};
  return {kind, end};
}

// The end of the code point that starts at `i`.
std::size_t codePointEnd(std::string_view s, std::size_t i) {
  ++i;
  while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
  return i;
}

// STRING at `i` (a quote), or UNTERMINATED_STRING when it is not closed: the
// kind and the end.
std::pair<TokenKind, std::size_t> string(std::string_view s, std::size_t i) {
  std::size_t j = i + 1;
  while (j < s.size()) {
    if (s[j] == '"') return {TokenKind::String, j + 1};
    if (s[j] == '\r' || s[j] == '\n') break;
    if (s[j] == '\\') {
      // ESCAPE is a backslash and one code point (a newline too).
      if (j + 1 >= s.size()) break;
      j = codePointEnd(s, j + 1);
    } else {
      ++j;
    }
  }
  return {TokenKind::UnterminatedString, j};
}

class Cursor {
 public:
  explicit Cursor(std::string_view source) : s_(source) {}

  bool done() const { return i_ >= s_.size(); }
  std::size_t at() const { return i_; }
  char peek(std::size_t ahead = 0) const { return i_ + ahead < s_.size() ? s_[i_ + ahead] : '\0'; }

  /// Moves to `end`, counting lines and code points as ANTLR's lexer does.
  void advanceTo(std::size_t end) {
    for (; i_ < end; ++i_) {
      bool starts = (static_cast<unsigned char>(s_[i_]) & 0xC0) != 0x80;
      offset_ += starts;
      if (s_[i_] == '\n') {
        ++line_;
        column_ = 0;
      } else {
        column_ += starts;
      }
    }
  }

  Token token(TokenKind kind, std::size_t end) {
    std::string_view text = s_.substr(i_, end - i_);
    Token t{kind, text, line_, column_, codePoints(text), offset_};
    advanceTo(end);
    return t;
  }

 private:
  std::string_view s_;
  std::size_t i_ = 0;
  std::uint32_t line_ = 0, column_ = 0, offset_ = 0;
};

}  // namespace

bool isError(const Token& token) {
  return token.kind == TokenKind::UnterminatedString || token.kind == TokenKind::UnknownChar;
}

std::vector<FilterToken> filterView(const std::vector<Token>& tokens) {
  std::vector<FilterToken> views;
  views.reserve(tokens.size());
  for (const Token& t : tokens)
    views.push_back({t.kind == TokenKind::Newline, t.kind == TokenKind::String, t.text});
  return views;
}

std::vector<Token> scan(std::string_view s) {
  std::vector<Token> tokens;
  tokens.reserve(s.size() / 3 + 1);
  Cursor cursor(s);
  while (!cursor.done()) {
    const std::size_t i = cursor.at();
    const char c = cursor.peek();
    if (c == ' ' || c == '\t') {
      cursor.advanceTo(i + 1);
    } else if (c == '#') {
      std::size_t end = s.find_first_of("\r\n", i);
      cursor.advanceTo(end == std::string_view::npos ? s.size() : end);
    } else if (c == '\n' || (c == '\r' && cursor.peek(1) == '\n')) {
      tokens.push_back(cursor.token(TokenKind::Newline, i + (c == '\r' ? 2 : 1)));
    } else if (c == '\\' && (cursor.peek(1) == '\n' || (cursor.peek(1) == '\r' && cursor.peek(2) == '\n'))) {
      // A line continuation; a backslash anywhere else is an error token.
      cursor.advanceTo(i + (cursor.peek(1) == '\r' ? 3 : 2));
    } else if (isDigit(c)) {
      auto [kind, end] = number(s, i);
      tokens.push_back(cursor.token(kind, end));
    } else if (isIdentStart(c)) {
      std::size_t end = i + 1;
      while (end < s.size() && isIdentPart(s[end])) ++end;
      std::string_view word = s.substr(i, end - i);
      bool keyword = std::find(kKeywords.begin(), kKeywords.end(), word) != kKeywords.end();
      tokens.push_back(cursor.token(keyword ? TokenKind::Symbol : TokenKind::Ident, end));
    } else if (c == '"') {
      auto [kind, end] = string(s, i);
      tokens.push_back(cursor.token(kind, end));
    } else {
      auto match = std::find_if(kPunctuation.begin(), kPunctuation.end(),
                                [&](std::string_view p) { return s.substr(i, p.size()) == p; });
      if (match == kPunctuation.end())
        tokens.push_back(cursor.token(TokenKind::UnknownChar, codePointEnd(s, i)));
      else
        tokens.push_back(cursor.token(TokenKind::Symbol, i + match->size()));
    }
  }
  return tokens;
}

}  // namespace meshflow::grammar
