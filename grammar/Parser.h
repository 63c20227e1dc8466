// The front end's one entry point: source text in, meshflow AST and diagnostics out.
#pragma once

#include <memory>
#include <vector>

#include "interp/Ast.h"
#include "meshflow/Diagnostic.h"

namespace meshflow::grammar {

struct ParseResult {
  std::shared_ptr<ast::Program> program;  // null when there were errors
  std::vector<Diagnostic> diagnostics;
  /// The source stopped in the middle of a construct (an unclosed bracket or
  /// block, a dangling operator): the REPL asks for a continuation line.
  bool incomplete = false;

  bool ok() const { return program != nullptr; }
};

/// Brackets and blocks nested deeper than this are a NestingTooDeep diagnostic:
/// the generated parser recurses once per level and must not exhaust the stack.
inline constexpr int kMaxNesting = 100;
/// Expression trees deeper than this (long operator chains) are NestingTooDeep too.
inline constexpr int kMaxExpressionDepth = 1000;
/// After this many syntax errors the parser stops reporting.
inline constexpr int kMaxSyntaxErrors = 20;

/// Parses with DirectParser, the fast path; where it gives up (the source has
/// an error, or something it does not know), with ANTLR and Transformer, whose
/// diagnostics are the ones users see.
ParseResult parse(std::shared_ptr<const interp::SourceFile> file);
/// The AST of a source without errors, or null, without working out what its
/// errors are: DirectParser alone, a tenth of the cost of ANTLR's parse.
std::shared_ptr<ast::Program> parseClean(std::shared_ptr<const interp::SourceFile> file);
/// The ANTLR front end alone (for tests that compare the two).
ParseResult parseWithAntlr(std::shared_ptr<const interp::SourceFile> file);
/// Whether the hand-written scanner makes exactly the tokens of ANTLR's
/// generated lexer (types, texts, lines, columns, character indices); false
/// for a source that is not valid UTF-8. Where it does and the direct parser
/// gives up, `parse` and `parseWithAntlr` run ANTLR's parser on equal tokens,
/// so fuzz_parse compares the tokens instead of parsing twice.
bool scannerAgreesWithAntlr(const interp::SourceFile& file);

}  // namespace meshflow::grammar
