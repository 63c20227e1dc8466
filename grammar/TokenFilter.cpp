#include "grammar/TokenFilter.h"

#include <algorithm>
#include <array>

#include "grammar/Parser.h"

namespace meshflow::grammar {
namespace {

// Tokens after which an expression must continue: a newline there is not the
// end of a statement.
bool needsRightOperand(std::string_view text) {
  static constexpr std::array<std::string_view, 27> kTokens = {
      "+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "and", "or",
      "not", "..", "=", "+=", "-=", "*=", "/=", ",", ".", "(", "[", ":"};
  return std::find(kTokens.begin(), kTokens.end(), text) != kTokens.end();
}

// A `{` opens a record literal where an expression may start, and a block
// everywhere else (after `)`, a name, `else` …).
bool opensRecord(const FilterToken* previous) {
  if (previous == nullptr || previous->newline) return true;
  return previous->text == ";" || previous->text == "return" || previous->text == "{" ||
         needsRightOperand(previous->text);
}

// Words that only start a statement: after a line break inside brackets, one
// of them means the bracket was never closed (`print(f(x)` then `let y = 2`).
bool startsStatement(const FilterToken& token) {
  static constexpr std::array<std::string_view, 10> kWords = {
      "let", "var", "fn", "import", "for", "while", "if", "return", "break", "continue"};
  return !token.string && std::find(kWords.begin(), kWords.end(), token.text) != kWords.end();
}

enum class Open { Paren, Record, Block };

struct OpenBracket {
  Open kind;
  std::size_t token;
};

}  // namespace

FilteredTokens filterNewlines(const std::vector<FilterToken>& tokens) {
  FilteredTokens result;
  result.kept.reserve(tokens.size());
  std::vector<OpenBracket> open;
  const FilterToken* previous = nullptr;  // last token kept
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const FilterToken& token = tokens[i];
    const std::string_view text = token.text;
    if (token.newline) {
      bool insideExpression = !open.empty() && open.back().kind != Open::Block;
      if (insideExpression && i + 1 < tokens.size() && startsStatement(tokens[i + 1])) {
        result.problem = FilterProblem{FilterProblem::Kind::Unclosed, open.back().token};
        return result;
      }
      bool afterOperator = previous && !previous->newline && needsRightOperand(previous->text);
      bool repeated = !previous || previous->newline;
      bool beforeElse = i + 1 < tokens.size() && tokens[i + 1].text == "else" && !tokens[i + 1].string;
      if (insideExpression || afterOperator || repeated || beforeElse) continue;
    } else if (!token.string) {
      if (text == "(" || text == "[" || text == "{") {
        Open kind = text == "{" ? (opensRecord(previous) ? Open::Record : Open::Block)
                                : Open::Paren;
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
      } else if ((text == ")" || text == "]" || text == "}") && !open.empty()) {
        open.pop_back();
      }
    }
    previous = &token;
    result.kept.push_back(i);
  }
  if (!open.empty()) result.openAtEnd = open.back().token;
  return result;
}

}  // namespace meshflow::grammar
