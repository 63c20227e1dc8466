#include "grammar/Scanner.h"

#include <array>
#include <unordered_map>

namespace meshflow::grammar {
namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isIdentStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool isIdentPart(char c) { return isIdentStart(c) || isDigit(c); }

constexpr std::array<std::string_view, static_cast<std::size_t>(Sym::Count)> kSpellings = {
    "",         "import", "as",   "let",  "var",   "fn",    "layer",  "model", "cluster",
    "schedule", "if",     "else", "for",  "in",    "while", "return", "break", "continue",
    "or",       "and",    "not",  "true", "false", "none",  "auto",   ";",     "{",
    "}",        "(",      ")",    "[",    "]",     ",",     ".",      "..",    ":",
    "=",        "+=",     "-=",   "*=",   "/=",    "==",    "!=",     "<",     "<=",
    ">",        ">=",     "+",    "-",    "*",     "/",     "//",     "%",     "**"};

static_assert(kSpellings[static_cast<std::size_t>(Sym::Auto)] == "auto" &&
              kSpellings[static_cast<std::size_t>(Sym::Semicolon)] == ";" &&
              kSpellings[static_cast<std::size_t>(Sym::StarStar)] == "**");

Sym keyword(std::string_view word) {
  static const auto keywords = [] {
    std::unordered_map<std::string_view, Sym> map;
    for (auto s = static_cast<std::size_t>(Sym::Import); s <= static_cast<std::size_t>(Sym::Auto);
         ++s)
      map.emplace(kSpellings[s], static_cast<Sym>(s));
    return map;
  }();
  auto it = keywords.find(word);
  return it == keywords.end() ? Sym::None : it->second;
}

// The punctuation at `i` (the longest that matches) and its length, or None.
std::pair<Sym, std::size_t> punctuation(std::string_view s, std::size_t i) {
  const char next = i + 1 < s.size() ? s[i + 1] : '\0';
  auto oneOrTwo = [&](Sym one, char second, Sym two) -> std::pair<Sym, std::size_t> {
    return next == second ? std::pair{two, std::size_t{2}} : std::pair{one, std::size_t{1}};
  };
  switch (s[i]) {
    case ';':
      return {Sym::Semicolon, 1};
    case '{':
      return {Sym::LeftBrace, 1};
    case '}':
      return {Sym::RightBrace, 1};
    case '(':
      return {Sym::LeftParen, 1};
    case ')':
      return {Sym::RightParen, 1};
    case '[':
      return {Sym::LeftBracket, 1};
    case ']':
      return {Sym::RightBracket, 1};
    case ',':
      return {Sym::Comma, 1};
    case ':':
      return {Sym::Colon, 1};
    case '%':
      return {Sym::Percent, 1};
    case '.':
      return oneOrTwo(Sym::Dot, '.', Sym::DotDot);
    case '=':
      return oneOrTwo(Sym::Assign, '=', Sym::Equal);
    case '<':
      return oneOrTwo(Sym::Less, '=', Sym::LessEqual);
    case '>':
      return oneOrTwo(Sym::Greater, '=', Sym::GreaterEqual);
    case '+':
      return oneOrTwo(Sym::Plus, '=', Sym::PlusAssign);
    case '-':
      return oneOrTwo(Sym::Minus, '=', Sym::MinusAssign);
    case '!':
      return next == '=' ? std::pair{Sym::NotEqual, std::size_t{2}}
                         : std::pair{Sym::None, std::size_t{0}};
    case '*':
      if (next == '*') return {Sym::StarStar, 2};
      return oneOrTwo(Sym::Star, '=', Sym::StarAssign);
    case '/':
      if (next == '/') return {Sym::SlashSlash, 2};
      return oneOrTwo(Sym::Slash, '=', Sym::SlashAssign);
    default:
      return {Sym::None, 0};
  }
}

// Mesh.g4's UNIT fragment.
constexpr std::array<std::string_view, 31> kUnits = {
    "B",     "KB",    "MB",     "GB",     "TB",     "PB",     "KiB",   "MiB",
    "GiB",   "TiB",   "b",      "Kb",     "Mb",     "Gb",     "Tb",    "s",
    "ms",    "us",    "ns",     "FLOP",   "KFLOP",  "MFLOP",  "GFLOP", "TFLOP",
    "PFLOP", "FLOPS", "KFLOPS", "MFLOPS", "GFLOPS", "TFLOPS", "PFLOPS"};

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
  // Every unit starts with one of these letters.
  static constexpr std::string_view kFirst = "BKMGTPbsmunF";
  if (i >= s.size() || kFirst.find(s[i]) == std::string_view::npos) return i;
  std::size_t best = 0;
  for (std::string_view unit : kUnits)
    if (unit.size() > best && unit[0] == s[i] && s.substr(i, unit.size()) == unit)
      best = unit.size();
  if (best == 0) return i;
  std::size_t end = i + best;
  if (end + 1 < s.size() && s[end] == '/' && s[end + 1] == 's') end += 2;
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

  Token token(TokenKind kind, std::size_t end, Sym symbol = Sym::None) {
    std::string_view text = s_.substr(i_, end - i_);
    Token t{kind, symbol, text, line_, column_, 0, offset_};
    std::uint32_t before = offset_;
    if (isAscii(kind)) {
      // One line, one byte per code point.
      auto length = static_cast<std::uint32_t>(end - i_);
      i_ = end;
      column_ += length;
      offset_ += length;
    } else {
      advanceTo(end);
    }
    t.width = offset_ - before;
    return t;
  }

 private:
  // Names, numbers and punctuation are ASCII and never hold a line break.
  static bool isAscii(TokenKind kind) {
    return kind == TokenKind::Ident || kind == TokenKind::Int || kind == TokenKind::Float ||
           kind == TokenKind::Quantity || kind == TokenKind::Symbol;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::uint32_t line_ = 0, column_ = 0, offset_ = 0;
};

}  // namespace

std::string_view spelling(Sym symbol) { return kSpellings[static_cast<std::size_t>(symbol)]; }

bool isError(const Token& token) {
  return token.kind == TokenKind::UnterminatedString || token.kind == TokenKind::UnknownChar;
}

std::vector<FilterToken> filterView(const std::vector<Token>& tokens) {
  std::vector<FilterToken> views;
  views.reserve(tokens.size());
  for (const Token& t : tokens)
    views.push_back(filterToken(t.kind == TokenKind::Newline, t.kind == TokenKind::String, t.text));
  return views;
}

std::vector<Token> scan(std::string_view s) {
  // A byte-order mark opening the source is not part of it: ANTLR's input
  // stream drops it too, so lines, columns and offsets start after it.
  if (s.substr(0, 3) == "\xEF\xBB\xBF") s.remove_prefix(3);
  std::vector<Token> tokens;
  tokens.reserve(s.size() / 3 + 1);
  Cursor cursor(s);
  while (!cursor.done()) {
    const std::size_t i = cursor.at();
    const char c = cursor.peek();
    if (c == ' ' || c == '\t') {
      cursor.advanceTo(i + 1);
    } else if (c == '#') {
      std::size_t end = i;
      while (end < s.size() && s[end] != '\r' && s[end] != '\n') ++end;
      cursor.advanceTo(end);
    } else if (c == '\n' || (c == '\r' && cursor.peek(1) == '\n')) {
      tokens.push_back(cursor.token(TokenKind::Newline, i + (c == '\r' ? 2 : 1)));
    } else if (c == '\\' &&
               (cursor.peek(1) == '\n' || (cursor.peek(1) == '\r' && cursor.peek(2) == '\n'))) {
      // A line continuation; a backslash anywhere else is an error token.
      cursor.advanceTo(i + (cursor.peek(1) == '\r' ? 3 : 2));
    } else if (isDigit(c)) {
      auto [kind, end] = number(s, i);
      tokens.push_back(cursor.token(kind, end));
    } else if (isIdentStart(c)) {
      std::size_t end = i + 1;
      while (end < s.size() && isIdentPart(s[end])) ++end;
      Sym word = keyword(s.substr(i, end - i));
      tokens.push_back(
          cursor.token(word == Sym::None ? TokenKind::Ident : TokenKind::Symbol, end, word));
    } else if (c == '"') {
      auto [kind, end] = string(s, i);
      tokens.push_back(cursor.token(kind, end));
    } else if (auto [symbol, length] = punctuation(s, i); symbol != Sym::None) {
      tokens.push_back(cursor.token(TokenKind::Symbol, i + length, symbol));
    } else {
      tokens.push_back(cursor.token(TokenKind::UnknownChar, codePointEnd(s, i)));
    }
  }
  return tokens;
}

}  // namespace meshflow::grammar
