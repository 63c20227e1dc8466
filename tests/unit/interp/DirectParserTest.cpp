// The direct parser (grammar/DirectParser.h) against the ANTLR front end: on
// every .mesh file of the tree, on variants of them with a byte removed,
// doubled or swapped, and on sources chosen for the places where the two could
// differ, the direct parser gives either the ANTLR front end's AST (compared
// as text, spans and heights included) or nothing where that front end reports
// a diagnostic; and every file of the tree takes the fast path.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "grammar/AstText.h"
#include "grammar/DirectParser.h"
#include "grammar/Parser.h"

using namespace meshflow;

namespace {

namespace fs = std::filesystem;

struct Outcome {
  bool direct = false;  // the fast path gave the AST
  bool agree = true;
};

std::string diagnosticsText(const std::vector<Diagnostic>& diagnostics) {
  std::string text;
  for (const Diagnostic& d : diagnostics) text += d.render() + "\n";
  return text;
}

// grammar::parse (the fast path first) against the ANTLR front end alone.
Outcome compare(const std::string& text) {
  auto file = std::make_shared<interp::SourceFile>("t.mesh", text);
  auto antlr = grammar::parseWithAntlr(file);
  auto parsed = grammar::parse(file);
  Outcome outcome;
  outcome.direct = parsed.ok() && parsed.diagnostics.empty() && antlr.ok() &&
                   grammar::parseDirect(file) != nullptr;
  std::string expected =
      antlr.ok() ? grammar::astText(*antlr.program) : diagnosticsText(antlr.diagnostics);
  std::string got =
      parsed.ok() ? grammar::astText(*parsed.program) : diagnosticsText(parsed.diagnostics);
  outcome.agree =
      parsed.ok() == antlr.ok() && parsed.incomplete == antlr.incomplete && got == expected;
  if (!outcome.agree)
    UNSCOPED_INFO("source:\n" << text << "\nparse:\n" << got << "\nantlr:\n" << expected);
  return outcome;
}

std::vector<std::string> treeSources() {
  std::vector<std::string> sources;
  for (const char* folder : {"tests/golden", "examples", "stdlib"})
    for (const auto& entry :
         fs::recursive_directory_iterator(fs::path(MESHFLOW_SOURCE_DIR) / folder))
      if (entry.path().extension() == ".mesh") {
        std::ifstream in(entry.path(), std::ios::binary);
        sources.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      }
  return sources;
}

}  // namespace

TEST_CASE("the direct parser gives ANTLR's AST for every .mesh file of the tree", "[parser]") {
  auto sources = treeSources();
  REQUIRE(sources.size() > 250);
  for (const std::string& text : sources) {
    auto antlr = grammar::parseWithAntlr(std::make_shared<interp::SourceFile>("t.mesh", text));
    Outcome outcome = compare(text);
    CHECK(outcome.agree);
    // A file ANTLR parses cleanly takes the fast path.
    if (antlr.ok()) CHECK(outcome.direct);
  }
}

TEST_CASE("the direct parser agrees with ANTLR on damaged files", "[parser]") {
  std::size_t tried = 0, direct = 0;
  for (const std::string& text : treeSources()) {
    if (text.empty()) continue;
    for (std::size_t k = 1; k <= 6; ++k) {
      std::size_t at = text.size() * k / 7;
      std::string removed = text, doubled = text, swapped = text;
      removed.erase(at, 1);
      doubled.insert(at, 1, text[at]);
      if (at + 1 < text.size()) std::swap(swapped[at], swapped[at + 1]);
      for (const std::string* variant : {&removed, &doubled, &swapped}) {
        Outcome outcome = compare(*variant);
        CHECK(outcome.agree);
        ++tried;
        direct += outcome.direct;
      }
    }
  }
  // Most damaged files no longer parse; many still do, and took the fast path.
  CHECK(direct > tried / 10);
}

TEST_CASE("the direct parser agrees with ANTLR where the lexer or the grammar is subtle",
          "[parser]") {
  const char* sources[] = {
      // numbers, quantities and units: the longest match
      "x = 1..3",
      "x = 1.5..3",
      "x = 1.e5",
      "x = 1e5",
      "x = 1e+5s",
      "x = 1.5e-3MB",
      "x = 5MB/s",
      "x = 5MB/sx",
      "x = 5ms",
      "x = 5m",
      "x = 5Gix",
      "x = 5GiB",
      "x = 5GFLOPS",
      "x = 1_000",
      "x = 1__0",
      "x = 1_",
      "x = 5s/s",
      "x = 5ms/s",
      "x = 9223372036854775807",
      "x = 9223372036854775808",
      "x = 1e400",
      "x = 5KB/s + 1",
      "x = 1.5.2",
      "x = 5x",
      // strings
      R"(x = "a\"b")",
      R"(x = "a\qb")",
      "x = \"a\\\nb\"",
      "x = \"open",
      "x = \"é\" + y",
      "x = \"\\é\"",
      // newlines, continuations, separators
      "x = 1 +\n 2",
      "x = (1\n + 2)",
      "f(a,\n b)",
      "x = 1 \\\n + 2",
      "x = 1 \\ + 2",
      "x = 1\r\ny = 2",
      "x = 1\ry = 2",
      ";;x = 1;;",
      "\n\n",
      "",
      "# only a comment",
      "if a {\n} \n else {\n}",
      "print(f(x)\nlet y = 2",
      "x = [1,\n2,\n]",
      // statements that start with a declaration word
      "model = 3",
      "model(3)",
      "layer.x = 2",
      "cluster c { }",
      "cluster c(n) { }",
      "schedule s { }",
      "model m(x) { return x }",
      "layer l() { }",
      "schedule = 1",
      "cluster",
      "model m",
      // assignments and their targets
      "a.b[1] = 2",
      "a += 1",
      "a -= 1",
      "a *= 1",
      "a /= 1",
      "f() = 1",
      "(a) = 1",
      "1 = 2",
      "a == b",
      "-a = 1",
      // operators
      "x = -2 ** -3 ** 2",
      "x = not not a and b or c",
      "x = a < b < c",
      "x = a .. b .. c",
      "x = a // b % c * d / e",
      "x = a ** b",
      "x = + - + a",
      "x = a ! b",
      "x = a != b",
      // postfix, literals, records
      "f(a, b = 2, c,)",
      "f(,)",
      "x[1, 2,]",
      "x[]",
      "x.model.layer",
      "x = []",
      "x = [,]",
      "x = {}",
      "x = {a: 1, \"b c\": 2,}",
      "x = {a: 1, a: 2}",
      "x = {\"a\": 1, a: 2}",
      "x = (((1)))",
      "x = true and false or none == auto",
      // declarations and blocks
      "fn f(a, b = 1,) = a + b",
      "fn f() { return }",
      "fn f() { return {a: 1} }",
      "return 1",
      "break",
      "for i in 0..3 { break; continue }",
      "while x { fn g() { break } }",
      "for i in xs { schedule s { break } }",
      "if a { } else if b { } else { }",
      "import std.layers as L",
      "import \"file.mesh\"",
      "import a.b.c",
      "let x = 1; var y = 2",
      "let model = 1",
      "fn f(model) = model",
      // error tokens and errors at the end (the ANTLR parser then reads the scanner's tokens)
      "x = \"abc\\",
      "x = \"abc\\\nd",
      "x = é",
      "x = 1 \\",
      "x = @",
      "x = \x01",
      "f(",
      "x = ",
      "fn f(x {\n}\n",
      "[1, 2",
      "x = \"a\" \"b",
      "\"\"\"",
      "let = 1\nlet = 2\n",
      "if x {\n  y = \"é\n}",
      "x = 1 +",
      "print(1))",
      "{a: 1,, b: 2}",
  };
  for (const char* text : sources) {
    INFO(text);
    CHECK(compare(text).agree);
  }
}

// fuzz_parse compares the two front ends' tokens instead of parsing a source
// with errors twice (grammar::scannerAgreesWithAntlr): the scanner must make
// exactly the ANTLR lexer's tokens, error tokens included.
TEST_CASE("the scanner makes exactly the ANTLR lexer's tokens", "[parser]") {
  auto agrees = [](const std::string& text) {
    return grammar::scannerAgreesWithAntlr(interp::SourceFile("t.mesh", text));
  };
  // Sources that are not UTF-8 (two goldens; a byte removed from a multi-byte
  // character) have no tokens to compare.
  auto utf8 = [](const std::string& text) {
    auto parsed = grammar::parse(std::make_shared<interp::SourceFile>("t.mesh", text));
    return parsed.diagnostics.empty() ||
           parsed.diagnostics.front().kind != DiagnosticKind::InvalidUtf8;
  };
  std::size_t compared = 0;
  for (const std::string& text : treeSources())
    for (std::size_t k = 0; k <= 3 && !text.empty(); ++k) {
      std::string variant = text;
      if (k > 0) variant.erase(text.size() * k / 4, 1);
      if (!utf8(variant)) continue;
      INFO(variant);
      CHECK(agrees(variant));
      ++compared;
    }
  CHECK(compared > 1000);
  for (const char* text : {"x = \"open", "x = \"abc\\\nd", "x = @ é \x01", "\xEF\xBB\xBFx = 1",
                           "x = 1 \\\n + 2 # note", "x = 5MB/sx 1e+5s 1__0", ""}) {
    INFO(text);
    CHECK(agrees(text));
  }
  CHECK_FALSE(agrees("x = \"\xFF\""));  // not UTF-8: nothing to compare
}
