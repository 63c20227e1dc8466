#include <catch2/catch.hpp>

#include "grammar/Parser.h"

using namespace meshflow;

namespace {

grammar::ParseResult parseText(const std::string& text) {
  return grammar::parse(std::make_shared<interp::SourceFile>("t.mesh", text));
}

}  // namespace

TEST_CASE("statements and their spans", "[parser]") {
  auto result = parseText("let x = 1 + 2\nfn f(a, b = 2) = a * b\n");
  REQUIRE(result.ok());
  REQUIRE(result.program->statements.size() == 2);
  const auto& let = static_cast<const ast::LetStmt&>(*result.program->statements[0]);
  CHECK(let.name == "x");
  CHECK(let.value->kind == ast::ExprKind::Binary);
  CHECK(let.value->span.line == 0);
  CHECK(let.value->span.column == 8);
  CHECK(let.value->span.endColumn == 13);
  const auto& fn = static_cast<const ast::FunctionDecl&>(*result.program->statements[1]);
  CHECK(fn.name == "f");
  REQUIRE(fn.params.size() == 2);
  CHECK(fn.params[1].defaultValue != nullptr);
  CHECK(fn.nameSpan.line == 1);
}

TEST_CASE("precedence: power binds tighter than unary minus and is right-associative", "[parser]") {
  auto result = parseText("-2 ** 3 ** 2");
  REQUIRE(result.ok());
  const auto& stmt = static_cast<const ast::ExprStmt&>(*result.program->statements[0]);
  REQUIRE(stmt.expr->kind == ast::ExprKind::Unary);
  const auto& power = static_cast<const ast::BinaryExpr&>(*static_cast<const ast::UnaryExpr&>(*stmt.expr).operand);
  CHECK(power.op == ast::BinaryOp::Pow);
  CHECK(power.lhs->kind == ast::ExprKind::Int);
  CHECK(power.rhs->kind == ast::ExprKind::Binary);
}

TEST_CASE("newlines inside brackets and after operators do not end statements", "[parser]") {
  auto result = parseText("let x = f(1,\n  2) +\n  3\nlet r = {\n a: 1,\n b: 2\n}\nif x > 1 {\n}\nelse {\n}\n");
  CHECK(result.ok());
  CHECK(result.program->statements.size() == 3);
}

TEST_CASE("several syntax errors are reported from one parse", "[parser]") {
  auto result = parseText("let = 1\nprint(1 2)\nlet y = )\n");
  CHECK_FALSE(result.ok());
  CHECK(result.diagnostics.size() >= 3);
  for (const auto& d : result.diagnostics) CHECK(d.kind == DiagnosticKind::SyntaxError);
  CHECK(result.diagnostics[0].line == 0);
  CHECK(result.diagnostics.back().line == 2);
}

TEST_CASE("an input that stops early is incomplete; a wrong one is not", "[parser]") {
  CHECK(parseText("fn f(x) {\n  return x").incomplete);
  CHECK(parseText("let x = (1 +").incomplete);
  CHECK(parseText("let x = [1, 2,").incomplete);
  CHECK_FALSE(parseText("let x = 1 +* 2").incomplete);
  CHECK_FALSE(parseText("let x = 1").incomplete);
}

TEST_CASE("quantity literals are in base units", "[parser]") {
  auto result = parseText("25Gb/s");
  REQUIRE(result.ok());
  const auto& q = static_cast<const ast::QuantityLiteral&>(
      *static_cast<const ast::ExprStmt&>(*result.program->statements[0]).expr);
  CHECK(q.value == Approx(25e9 / 8));
  CHECK(q.dimension == Dimension{1, -1, 0});
}

TEST_CASE("literal problems are diagnostics", "[parser]") {
  auto tooBig = parseText("99999999999999999999");
  REQUIRE(tooBig.diagnostics.size() == 1);
  CHECK(tooBig.diagnostics[0].kind == DiagnosticKind::InvalidLiteral);
  auto badUnit = parseText("3TFLOPS/s");
  REQUIRE(!badUnit.diagnostics.empty());
  CHECK(badUnit.diagnostics[0].kind == DiagnosticKind::InvalidLiteral);
  auto escape = parseText("\"a\\qb\"");
  REQUIRE(escape.diagnostics.size() == 1);
  CHECK(escape.diagnostics[0].kind == DiagnosticKind::InvalidLiteral);
}

TEST_CASE("deep nesting is a diagnostic, not a stack overflow", "[parser]") {
  auto brackets = parseText(std::string(5000, '(') + "1" + std::string(5000, ')'));
  REQUIRE(brackets.diagnostics.size() == 1);
  CHECK(brackets.diagnostics[0].kind == DiagnosticKind::NestingTooDeep);
  std::string chain = "1";
  for (int i = 0; i < 100000; ++i) chain += "+1";
  auto operators = parseText(chain);
  REQUIRE(operators.diagnostics.size() == 1);
  CHECK(operators.diagnostics[0].kind == DiagnosticKind::NestingTooDeep);
  auto signs = parseText(std::string(100000, '-') + "1");
  REQUIRE(signs.diagnostics.size() == 1);
  CHECK(signs.diagnostics[0].kind == DiagnosticKind::NestingTooDeep);
}

TEST_CASE("misplaced return and break", "[parser]") {
  auto result = parseText("return 1\nfor i in 0..2 { fn g() { break } }\n");
  REQUIRE(result.diagnostics.size() == 2);
  CHECK(result.diagnostics[0].kind == DiagnosticKind::MisplacedStatement);
  CHECK(result.diagnostics[1].kind == DiagnosticKind::MisplacedStatement);
}

TEST_CASE("invalid UTF-8 is located", "[parser]") {
  auto result = parseText("let x = 1\nlet \xff = 2\n");
  REQUIRE(result.diagnostics.size() == 1);
  CHECK(result.diagnostics[0].kind == DiagnosticKind::InvalidUtf8);
  CHECK(result.diagnostics[0].line == 1);
  CHECK(result.diagnostics[0].column == 4);
}

TEST_CASE("an empty source, or one of only comments and blank lines, is an empty program", "[parser]") {
  for (const char* text : {"", "\n\n", "# only a comment\n", "   \t  "}) {
    auto result = parseText(text);
    REQUIRE(result.ok());
    CHECK(result.program->statements.empty());
  }
}
