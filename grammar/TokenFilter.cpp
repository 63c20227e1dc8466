#include "grammar/TokenFilter.h"

#include "grammar/Parser.h"

namespace meshflow::grammar {
namespace {

// The roles of a token (FilterToken::roles). Texts are told apart by their
// characters rather than compared as strings: under the fuzzer every string
// comparison is an intercepted memcmp.
enum Role : std::uint16_t {
  kNewline = 1 << 0,
  // Tokens after which an expression must continue: a newline there is not
  // the end of a statement.
  kNeedsOperand = 1 << 1,
  kOpenParen = 1 << 2,  // `(` or `[`
  kOpenBrace = 1 << 3,
  kClose = 1 << 4,  // `)`, `]` or `}`
  // Tokens after which a `{` opens a record (besides kNeedsOperand ones).
  kBeforeRecord = 1 << 5,  // `;`, `return`, `{`
  kElse = 1 << 6,
  // Words that only start a statement: after a line break inside brackets, one
  // of them means the bracket was never closed (`print(f(x)` then `let y = 2`).
  kStartsStatement = 1 << 7,
};

bool spelled(std::string_view text, std::string_view word) {
  if (text.size() != word.size()) return false;
  for (std::size_t i = 0; i < word.size(); ++i)
    if (text[i] != word[i]) return false;
  return true;
}

std::uint16_t rolesOfOneChar(char c) {
  switch (c) {
    case '(':
    case '[':
      return kNeedsOperand | kOpenParen;
    case '{':
      return kOpenBrace | kBeforeRecord;
    case ')':
    case ']':
    case '}':
      return kClose;
    case ';':
      return kBeforeRecord;
    case '+':
    case '-':
    case '*':
    case '/':
    case '%':
    case '<':
    case '>':
    case '=':
    case ',':
    case '.':
    case ':':
      return kNeedsOperand;
    default:
      return 0;
  }
}

std::uint16_t rolesOfWord(std::string_view text) {
  static constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", "<=",  ">=", "..",
                                                    "+=", "-=", "*=", "/=", "and", "or", "not"};
  static constexpr std::string_view kStatementWords[] = {"let",   "var", "fn",    "import",  "for",
                                                         "while", "if",  "break", "continue"};
  for (std::string_view op : kOperators)
    if (spelled(text, op)) return kNeedsOperand;
  for (std::string_view word : kStatementWords)
    if (spelled(text, word)) return kStartsStatement;
  if (spelled(text, "return")) return kStartsStatement | kBeforeRecord;
  if (spelled(text, "else")) return kElse;
  return 0;
}

enum class Open { Paren, Record, Block };

struct OpenBracket {
  Open kind;
  std::size_t token;
};

}  // namespace

FilterToken filterToken(bool newline, bool string, std::string_view text) {
  if (newline) return {kNewline};
  if (string || text.empty()) return {0};
  return {text.size() == 1 ? rolesOfOneChar(text[0]) : rolesOfWord(text)};
}

FilteredTokens filterNewlines(const std::vector<FilterToken>& tokens) {
  FilteredTokens result;
  result.kept.reserve(tokens.size());
  std::vector<OpenBracket> open;
  const FilterToken* previous = nullptr;  // last token kept
  auto has = [](const FilterToken* token, std::uint16_t role) {
    return token != nullptr && (token->roles & role) != 0;
  };
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const FilterToken& token = tokens[i];
    const FilterToken* next = i + 1 < tokens.size() ? &tokens[i + 1] : nullptr;
    if (has(&token, kNewline)) {
      bool insideExpression = !open.empty() && open.back().kind != Open::Block;
      if (insideExpression && has(next, kStartsStatement)) {
        result.problem = FilterProblem{FilterProblem::Kind::Unclosed, open.back().token};
        return result;
      }
      bool afterOperator = has(previous, kNeedsOperand);
      bool repeated = !previous || has(previous, kNewline);
      bool beforeElse = has(next, kElse);
      if (insideExpression || afterOperator || repeated || beforeElse) continue;
    } else if (has(&token, kOpenParen | kOpenBrace)) {
      // A `{` opens a record literal where an expression may start, and a
      // block everywhere else (after `)`, a name, `else` …).
      bool record = !previous || has(previous, kNewline | kNeedsOperand | kBeforeRecord);
      Open kind = has(&token, kOpenParen) ? Open::Paren : record ? Open::Record : Open::Block;
      // No block starts inside brackets, so brackets still open here were
      // left unclosed (`fn f(x {`). Forgetting them keeps the newlines after
      // the block as statement ends, and the errors reported later real ones.
      if (kind == Open::Block)
        while (!open.empty() && open.back().kind != Open::Block) open.pop_back();
      open.push_back({kind, i});
      if (static_cast<int>(open.size()) > kMaxNesting) {
        result.problem = FilterProblem{FilterProblem::Kind::TooDeep, i};
        return result;
      }
    } else if (has(&token, kClose) && !open.empty()) {
      open.pop_back();
    }
    previous = &token;
    result.kept.push_back(i);
  }
  if (!open.empty()) result.openAtEnd = open.back().token;
  return result;
}

}  // namespace meshflow::grammar
