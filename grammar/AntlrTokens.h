// Scanner's tokens as ANTLR tokens, for ANTLR's parser (internal to grammar/):
// ANTLR's generated lexer cost a fifth of the parse of a source with errors.
#pragma once

#include <memory>
#include <vector>

#include "antlr4-runtime.h"
#include "grammar/Scanner.h"

namespace meshflow::grammar {

/// What the ANTLR tokens name as their source (the parser's error recovery
/// asks a token for it when it makes up a missing one); it makes no tokens.
class ScannedTokenSource : public antlr4::TokenSource {
 public:
  std::unique_ptr<antlr4::Token> nextToken() override { return nullptr; }
  size_t getLine() const override { return 0; }
  size_t getCharPositionInLine() override { return 0; }
  antlr4::CharStream* getInputStream() override { return nullptr; }
  std::string getSourceName() override { return "scanner"; }
  antlr4::TokenFactory<antlr4::CommonToken>* getTokenFactory() override {
    return antlr4::CommonTokenFactory::DEFAULT.get();
  }
};

/// The tokens ANTLR's generated lexer makes of the same source: types, texts,
/// lines, columns and character indices.
std::vector<std::unique_ptr<antlr4::Token>> antlrTokens(const std::vector<Token>& tokens,
                                                        ScannedTokenSource& source);

}  // namespace meshflow::grammar
