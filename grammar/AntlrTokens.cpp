#include "grammar/AntlrTokens.h"

#include <array>
#include <string>
#include <unordered_map>

#include "MeshLexer.h"

namespace meshflow::grammar {
namespace {

using meshflow_generated::MeshLexer;

// The ANTLR token type of each keyword and punctuation, from the generated
// lexer's vocabulary (its literal names are quoted: `'import'`).
const std::array<size_t, static_cast<std::size_t>(Sym::Count)>& symbolTypes() {
  static const auto types = [] {
    std::unordered_map<std::string, size_t> byLiteral;
    antlr4::ANTLRInputStream empty("");
    MeshLexer lexer(&empty);
    const auto& vocabulary = lexer.getVocabulary();
    for (size_t type = 1; type <= vocabulary.getMaxTokenType(); ++type) {
      std::string literal = vocabulary.getLiteralName(type);
      if (literal.size() > 2) byLiteral.emplace(literal.substr(1, literal.size() - 2), type);
    }
    std::array<size_t, static_cast<std::size_t>(Sym::Count)> bySymbol{};
    for (std::size_t s = 1; s < bySymbol.size(); ++s)
      bySymbol[s] = byLiteral.at(std::string(spelling(static_cast<Sym>(s))));
    return bySymbol;
  }();
  return types;
}

size_t typeOf(const Token& token) {
  switch (token.kind) {
    case TokenKind::Newline:
      return MeshLexer::NEWLINE;
    case TokenKind::Ident:
      return MeshLexer::IDENT;
    case TokenKind::Int:
      return MeshLexer::INT;
    case TokenKind::Float:
      return MeshLexer::FLOAT;
    case TokenKind::Quantity:
      return MeshLexer::QUANTITY;
    case TokenKind::String:
      return MeshLexer::STRING;
    case TokenKind::UnterminatedString:
      return MeshLexer::UNTERMINATED_STRING;
    case TokenKind::UnknownChar:
      return MeshLexer::UNKNOWN_CHAR;
    case TokenKind::Symbol:
      return symbolTypes()[static_cast<std::size_t>(token.symbol)];
    case TokenKind::End:
      break;
  }
  return antlr4::Token::EOF;
}

}  // namespace

std::vector<std::unique_ptr<antlr4::Token>> antlrTokens(const std::vector<Token>& tokens,
                                                        ScannedTokenSource& source) {
  std::vector<std::unique_ptr<antlr4::Token>> out;
  out.reserve(tokens.size());
  for (const Token& t : tokens) {
    auto token = std::make_unique<antlr4::CommonToken>(
        std::pair<antlr4::TokenSource*, antlr4::CharStream*>{&source, nullptr}, typeOf(t),
        antlr4::Token::DEFAULT_CHANNEL, t.offset, t.offset + t.width - 1);
    token->setText(std::string(t.text));
    token->setLine(t.line + 1);
    token->setCharPositionInLine(t.column);
    out.push_back(std::move(token));
  }
  return out;
}

}  // namespace meshflow::grammar
