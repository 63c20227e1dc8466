#include "grammar/Parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "MeshLexer.h"
#include "MeshParser.h"
#include "antlr4-runtime.h"
#include "grammar/AntlrTokens.h"
#include "grammar/AstBuilder.h"
#include "grammar/DirectParser.h"
#include "grammar/TokenFilter.h"
#include "grammar/Transformer.h"

namespace meshflow::grammar {
namespace {

using meshflow_generated::MeshLexer;
using meshflow_generated::MeshParser;

interp::SourceSpan tokenSpan(const interp::SourceFile& file, const antlr4::Token* token) {
  interp::SourceSpan span;
  span.file = &file;
  span.line = token->getLine() > 0 ? static_cast<std::uint32_t>(token->getLine() - 1) : 0;
  span.column = static_cast<std::uint32_t>(token->getCharPositionInLine());
  span.endLine = span.line;
  std::uint32_t length =
      token->getType() == antlr4::Token::EOF ? 1 : std::max(1u, codePoints(token->getText()));
  span.endColumn = span.column + length;
  return span;
}

// The first byte that is not part of well-formed UTF-8, as a span.
std::optional<interp::SourceSpan> findInvalidUtf8(const interp::SourceFile& file) {
  const std::string& text = file.text();
  std::uint32_t line = 0, column = 0;
  for (std::size_t i = 0; i < text.size();) {
    auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {  // ASCII, most of every source: one comparison less per byte
      if (byte == '\n') {
        ++line;
        column = 0;
      } else {
        ++column;
      }
      ++i;
      continue;
    }
    std::size_t length = byte < 0x80 ? 1 : (byte >> 5) == 0x6 ? 2 : (byte >> 4) == 0xE ? 3
                                         : (byte >> 3) == 0x1E ? 4 : 0;
    bool ok = length > 0 && i + length <= text.size();
    for (std::size_t k = 1; ok && k < length; ++k)
      ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    // Overlong encodings and surrogates are malformed too.
    if (ok && length == 2) ok = byte >= 0xC2;
    if (ok && length == 3) {
      auto next = static_cast<unsigned char>(text[i + 1]);
      ok = !(byte == 0xE0 && next < 0xA0) && !(byte == 0xED && next >= 0xA0);
    }
    if (ok && length == 4) {
      auto next = static_cast<unsigned char>(text[i + 1]);
      ok = byte <= 0xF4 && !(byte == 0xF0 && next < 0x90) && !(byte == 0xF4 && next >= 0x90);
    }
    if (!ok) return interp::SourceSpan{&file, line, column, line, column + 1};
    if (byte == '\n') {
      ++line;
      column = 0;
    } else {
      ++column;
    }
    i += length;
  }
  return std::nullopt;
}

Diagnostic neverClosed(const interp::SourceFile& file, const antlr4::Token* bracket) {
  return interp::makeDiagnostic(DiagnosticKind::SyntaxError,
                                fmt::format("'{}' opened here is never closed", bracket->getText()),
                                tokenSpan(file, bracket));
}

std::string describeToken(const antlr4::Token* token) {
  if (token->getType() == antlr4::Token::EOF) return "end of input";
  if (token->getType() == MeshLexer::NEWLINE) return "end of line";
  std::string text = token->getText();
  if (token->getType() == MeshLexer::UNKNOWN_CHAR) {
    // A control character would be invisible between the quotes.
    auto byte = static_cast<unsigned char>(text[0]);
    if (text.size() == 1 && (byte < 0x20 || byte == 0x7F))
      return fmt::format("character U+{:04X}", static_cast<unsigned>(byte));
    return fmt::format("character '{}'", text);
  }
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return fmt::format("'{}'", text);
}

std::string describeExpected(const std::string& vocabularyName) {
  if (vocabularyName == "IDENT") return "a name";
  if (vocabularyName == "INT") return "an integer";
  if (vocabularyName == "FLOAT") return "a number";
  if (vocabularyName == "QUANTITY") return "a quantity";
  if (vocabularyName == "STRING") return "a string";
  if (vocabularyName == "NEWLINE") return "end of line";
  if (vocabularyName == "EOF" || vocabularyName == "<EOF>") return "end of input";
  return vocabularyName;
}

class SyntaxErrorCollector : public antlr4::BaseErrorListener {
 public:
  SyntaxErrorCollector(const interp::SourceFile& file, std::vector<Diagnostic>& out)
      : file_(file), out_(out) {}

  void syntaxError(antlr4::Recognizer* recognizer, antlr4::Token* offending, size_t, size_t,
                   const std::string&, std::exception_ptr) override {
    if (offending == nullptr) return;
    // Only an input whose first error is at its end is unfinished: after an
    // earlier error, more lines cannot make it parse.
    if (offending->getType() == antlr4::Token::EOF && count_ == 0) incomplete_ = true;
    if (++count_ > kMaxSyntaxErrors) return;
    if (offending->getType() == antlr4::Token::EOF) atEnd_ = out_.size();
    std::string message = "unexpected " + describeToken(offending);
    if (offending->getType() == MeshLexer::UNTERMINATED_STRING)
      message = "unterminated string (a string ends on the line it starts on)";
    else if (auto* parser = dynamic_cast<antlr4::Parser*>(recognizer))
      message += expectedSuffix(*parser);
    out_.push_back(interp::makeDiagnostic(DiagnosticKind::SyntaxError, message,
                                          tokenSpan(file_, offending)));
  }

  bool incomplete() const { return incomplete_; }
  /// The diagnostic reported at the end of the input, if one was.
  std::optional<std::size_t> atEnd() const { return atEnd_; }
  int count() const { return count_; }

 private:
  // Lists what would have been accepted when that is a short list; a long
  // list of every statement keyword helps nobody.
  static std::string expectedSuffix(antlr4::Parser& parser) {
    antlr4::misc::IntervalSet expected;
    try {
      expected = parser.getExpectedTokens();
    } catch (...) {
      return "";
    }
    std::vector<std::string> names;
    for (size_t type : expected.toList())
      names.push_back(describeExpected(parser.getVocabulary().getDisplayName(type)));
    // The declaration words are names too (the `name` rule of Mesh.g4), so
    // listing them beside "a name" only repeats it.
    if (std::find(names.begin(), names.end(), "a name") != names.end())
      std::erase_if(names, [](const std::string& n) {
        return n == "'model'" || n == "'layer'" || n == "'cluster'" || n == "'schedule'";
      });
    if (names.empty() || names.size() > 5) return "";
    std::string list = names[0];
    for (std::size_t i = 1; i < names.size(); ++i)
      list += (i + 1 == names.size() ? " or " : ", ") + names[i];
    return "; expected " + list;
  }

  const interp::SourceFile& file_;
  std::vector<Diagnostic>& out_;
  bool incomplete_ = false;
  int count_ = 0;
  std::optional<std::size_t> atEnd_;
};

// ANTLR's parser on `tokens` (all of the source's, unfiltered), then the transform.
ParseResult parseTokens(const std::shared_ptr<const interp::SourceFile>& file,
                        std::vector<std::unique_ptr<antlr4::Token>> tokens) {
  ParseResult result;
  std::vector<FilterToken> views;
  views.reserve(tokens.size());
  for (const auto& token : tokens)
    views.push_back(filterToken(token->getType() == MeshLexer::NEWLINE,
                                token->getType() == MeshLexer::STRING, token->getText()));
  FilteredTokens kept = filterNewlines(views);
  if (auto problem = kept.problem) {
    // Reported once, where the mistake is; the parser's view of the tokens
    // after it would only be a cascade.
    const antlr4::Token* where = tokens[problem->token].get();
    result.diagnostics.push_back(
        problem->kind == FilterProblem::Kind::TooDeep
            ? interp::makeDiagnostic(
                  DiagnosticKind::NestingTooDeep,
                  fmt::format("brackets and blocks nest deeper than {} levels", kMaxNesting),
                  tokenSpan(*file, where))
            : neverClosed(*file, where));
    return result;
  }
  const antlr4::Token* openAtEnd = kept.openAtEnd ? tokens[*kept.openAtEnd].get() : nullptr;
  std::vector<std::unique_ptr<antlr4::Token>> filtered;
  filtered.reserve(kept.kept.size());
  for (std::size_t i : kept.kept) filtered.push_back(std::move(tokens[i]));
  // ANTLR's ListTokenSource rejects an empty list: a source with nothing but
  // blanks and comments is the empty program.
  if (filtered.empty()) {
    result.program = std::make_shared<ast::Program>();
    result.program->file = file;
    return result;
  }
  antlr4::ListTokenSource source(std::move(filtered));
  antlr4::CommonTokenStream stream(&source);
  MeshParser parser(&stream);
  parser.removeErrorListeners();
  SyntaxErrorCollector collector(*file, result.diagnostics);
  parser.addErrorListener(&collector);
  auto* tree = parser.program();
  result.incomplete = collector.incomplete();
  // Input that ends inside brackets: the error is the bracket left open, not
  // the end of the input (the REPL still asks for more lines).
  if (auto atEnd = collector.atEnd(); atEnd && openAtEnd != nullptr)
    result.diagnostics[*atEnd] = neverClosed(*file, openAtEnd);
  if (collector.count() > kMaxSyntaxErrors)
    result.diagnostics.back().notes.push_back(interp::makeDiagnostic(
        DiagnosticKind::SyntaxError,
        fmt::format("{} more syntax errors not shown", collector.count() - kMaxSyntaxErrors), {},
        Severity::Note));
  if (collector.count() > 0) return result;
  auto program = transform(tree, file, result.diagnostics);
  if (result.diagnostics.empty()) result.program = std::move(program);
  return result;
}


// ANTLR's generated lexer over a source. Its tokens read their text from its
// input stream, so it outlives them.
struct AntlrLexer {
  explicit AntlrLexer(const std::string& text) : input(text), lexer(&input) {
    lexer.removeErrorListeners();
  }
  antlr4::ANTLRInputStream input;
  MeshLexer lexer;
};

// Everything of a token that ANTLR's parser, the error collector and the
// transformer read.
bool sameToken(const antlr4::Token& a, const antlr4::Token& b) {
  return a.getType() == b.getType() && a.getChannel() == b.getChannel() &&
         a.getLine() == b.getLine() && a.getCharPositionInLine() == b.getCharPositionInLine() &&
         a.getStartIndex() == b.getStartIndex() && a.getStopIndex() == b.getStopIndex() &&
         a.getText() == b.getText();
}

ParseResult invalidUtf8(const interp::SourceSpan& where) {
  ParseResult result;
  result.diagnostics.push_back(interp::makeDiagnostic(
      DiagnosticKind::InvalidUtf8, "the source is not valid UTF-8 (a malformed byte sequence starts here)",
      where));
  return result;
}

}  // namespace

ParseResult parse(std::shared_ptr<const interp::SourceFile> file) {
  if (auto bad = findInvalidUtf8(*file)) return invalidUtf8(*bad);
  std::vector<Token> tokens = scan(file->text());
  if (auto program = parseDirect(file, tokens)) return ParseResult{std::move(program), {}, false};
  ScannedTokenSource source;
  return parseTokens(file, antlrTokens(tokens, source));
}

std::shared_ptr<ast::Program> parseClean(std::shared_ptr<const interp::SourceFile> file) {
  if (findInvalidUtf8(*file)) return nullptr;
  return parseDirect(file);
}

ParseResult parseWithAntlr(std::shared_ptr<const interp::SourceFile> file) {
  if (auto bad = findInvalidUtf8(*file)) return invalidUtf8(*bad);
  AntlrLexer lexed(file->text());
  return parseTokens(file, lexed.lexer.getAllTokens());
}

bool scannerAgreesWithAntlr(const interp::SourceFile& file) {
  if (findInvalidUtf8(file)) return false;
  ScannedTokenSource source;
  const auto scanned = antlrTokens(scan(file.text()), source);
  AntlrLexer lexed(file.text());
  const auto lexedTokens = lexed.lexer.getAllTokens();
  return std::equal(scanned.begin(), scanned.end(), lexedTokens.begin(), lexedTokens.end(),
                    [](const auto& a, const auto& b) { return sameToken(*a, *b); });
}

}  // namespace meshflow::grammar
