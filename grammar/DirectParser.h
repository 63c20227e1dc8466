// A hand-written recursive-descent parser of Mesh.g4, straight to the AST
// (internal to grammar/). It is the fast path of grammar::parse: ANTLR's
// parse and the parse-tree transform cost about three quarters of a short
// script's eval. It accepts exactly the sources that the ANTLR front end
// accepts without a diagnostic, and gives the same AST for them; for anything
// else it gives up, and the ANTLR front end parses the source again and
// reports what is wrong, so every diagnostic keeps its one wording.
// tests/unit/interp/DirectParserTest.cpp and the fuzz target fuzz_parse
// compare the two front ends.
#pragma once

#include <memory>

#include <vector>

#include "grammar/Scanner.h"
#include "interp/Ast.h"

namespace meshflow::grammar {

/// The AST of `file` (valid UTF-8), or null where the ANTLR front end would
/// report a diagnostic.
std::shared_ptr<ast::Program> parseDirect(std::shared_ptr<const interp::SourceFile> file);
/// The same, from the file's tokens (scan(file->text())).
std::shared_ptr<ast::Program> parseDirect(const std::shared_ptr<const interp::SourceFile>& file,
                                          const std::vector<Token>& tokens);

}  // namespace meshflow::grammar
