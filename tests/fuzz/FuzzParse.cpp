// libFuzzer target: the two front ends of the parser agree (grammar/DirectParser.h).
// grammar::parse takes DirectParser's AST where it gives one and otherwise
// ANTLR's result; either way it must be exactly what the ANTLR front end alone
// gives: the same AST (compared as text, spans and heights included) or the
// same diagnostics; and a source without errors must take the fast path. A
// difference is a crash the fuzzer keeps.
//
// Where grammar::parse found errors, it ran ANTLR's parser on the scanner's
// tokens; the ANTLR front end alone runs the same parser on its lexer's. So
// where the two token lists are equal, the target checks that instead of
// parsing a second time (that parse was half of its time), and it parses again
// only where they differ, and for one input in eight (by its hash) so that the
// shortcut itself stays checked.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "grammar/AstText.h"
#include "grammar/Parser.h"
#include "tests/fuzz/FuzzCheck.h"

namespace {

using namespace meshflow;

std::string outcome(const grammar::ParseResult& result) {
  if (result.ok()) return grammar::astText(*result.program);
  return renderAll(result.diagnostics) + (result.incomplete ? "(incomplete)" : "");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto file = std::make_shared<interp::SourceFile>(
      "fuzz.mesh", std::string(reinterpret_cast<const char*>(data), size));
  const grammar::ParseResult parsed = grammar::parse(file);
  if (!parsed.ok() && !fuzz::oneInEight(data, size) && grammar::scannerAgreesWithAntlr(*file))
    return 0;
  auto reference = grammar::parseWithAntlr(file);
  std::string fast = outcome(parsed);
  std::string antlr = outcome(reference);
  fuzz::require(fast == antlr, "grammar::parse differs from the ANTLR front end:\n" + fast +
                                   "\n--- ANTLR:\n" + antlr);
  // Every source without errors takes the fast path (fuzz_eval runs only those).
  fuzz::require(!reference.ok() || grammar::parseClean(file) != nullptr,
                "the direct parser gave up on a source without errors");
  return 0;
}
