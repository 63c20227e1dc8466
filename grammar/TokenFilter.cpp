#include "grammar/TokenFilter.h"

#include <set>
#include <string>

#include "MeshLexer.h"
#include "grammar/Parser.h"

namespace meshflow::grammar {
namespace {

using meshflow_generated::MeshLexer;

// Tokens after which an expression must continue: a newline there is not the
// end of a statement.
bool needsRightOperand(const std::string& text) {
  static const std::set<std::string> kTokens = {
      "+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "and", "or",
      "not", "..", "=", "+=", "-=", "*=", "/=", ",", ".", "(", "[", ":"};
  return kTokens.count(text) > 0;
}

// A `{` opens a record literal where an expression may start, and a block
// everywhere else (after `)`, a name, `else` …).
bool opensRecord(const antlr4::Token* previous) {
  if (previous == nullptr || previous->getType() == MeshLexer::NEWLINE) return true;
  const std::string text = previous->getText();
  return text == ";" || text == "return" || text == "{" || needsRightOperand(text);
}

// Words that only start a statement: after a line break inside brackets, one
// of them means the bracket was never closed (`print(f(x)` then `let y = 2`).
bool startsStatement(const antlr4::Token& token) {
  static const std::set<std::string> kWords = {"let",   "var", "fn",     "import", "for",
                                               "while", "if",  "return", "break",  "continue"};
  return token.getType() != MeshLexer::STRING && kWords.count(token.getText()) > 0;
}

enum class Open { Paren, Record, Block };

struct OpenBracket {
  Open kind;
  const antlr4::Token* token;
};

}  // namespace

std::optional<FilterProblem> filterNewlines(std::vector<std::unique_ptr<antlr4::Token>>& tokens,
                                            std::vector<std::unique_ptr<antlr4::Token>>& out,
                                            const antlr4::Token*& openAtEnd) {
  std::vector<OpenBracket> open;
  const antlr4::Token* previous = nullptr;  // last token kept
  openAtEnd = nullptr;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    auto& token = tokens[i];
    const std::string text = token->getText();
    if (token->getType() == MeshLexer::NEWLINE) {
      bool insideExpression = !open.empty() && open.back().kind != Open::Block;
      if (insideExpression && i + 1 < tokens.size() && startsStatement(*tokens[i + 1]))
        return FilterProblem{FilterProblem::Kind::Unclosed, open.back().token};
      bool afterOperator = previous && needsRightOperand(previous->getText());
      bool repeated = !previous || previous->getType() == MeshLexer::NEWLINE;
      bool beforeElse = i + 1 < tokens.size() && tokens[i + 1]->getText() == "else" &&
                        tokens[i + 1]->getType() != MeshLexer::STRING;
      if (insideExpression || afterOperator || repeated || beforeElse) continue;
    } else if (token->getType() != MeshLexer::STRING) {
      if (text == "(" || text == "[" || text == "{") {
        Open kind = text == "{" ? (opensRecord(previous) ? Open::Record : Open::Block)
                                : Open::Paren;
        // No block starts inside brackets, so brackets still open here were
        // left unclosed (`fn f(x {`). Forgetting them keeps the newlines after
        // the block as statement ends, and the errors reported later real ones.
        if (kind == Open::Block)
          while (!open.empty() && open.back().kind != Open::Block) open.pop_back();
        open.push_back({kind, token.get()});
        if (static_cast<int>(open.size()) > kMaxNesting)
          return FilterProblem{FilterProblem::Kind::TooDeep, token.get()};
      } else if ((text == ")" || text == "]" || text == "}") && !open.empty()) {
        open.pop_back();
      }
    }
    previous = token.get();
    out.push_back(std::move(token));
  }
  if (!open.empty()) openAtEnd = open.back().token;
  return std::nullopt;
}

}  // namespace meshflow::grammar
