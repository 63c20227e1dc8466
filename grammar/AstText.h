// The whole AST as text: every node, field, span and height. Two front ends
// agree on a source when they give the same text (tests/unit/interp/
// DirectParserTest.cpp, the fuzz target fuzz_parse).
#pragma once

#include <string>

#include "interp/Ast.h"

namespace meshflow::grammar {

std::string astText(const ast::Program& program);

}  // namespace meshflow::grammar
