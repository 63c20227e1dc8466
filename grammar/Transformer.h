// Parse tree → meshflow AST (internal to grammar/).
#pragma once

#include <memory>
#include <vector>

#include "MeshParser.h"
#include "interp/Ast.h"

namespace meshflow::grammar {

/// Builds the AST of a parse tree that had no syntax errors. Problems found
/// while building (malformed literals, trees nested too deep, misplaced
/// return/break) are appended to `diagnostics`.
std::shared_ptr<ast::Program> transform(meshflow_generated::MeshParser::ProgramContext* tree,
                                        std::shared_ptr<const interp::SourceFile> file,
                                        std::vector<Diagnostic>& diagnostics);

}  // namespace meshflow::grammar
