#include <catch2/catch.hpp>

#include "interp/Units.h"
#include "meshflow/meshflow.h"

using namespace meshflow;

namespace {

// Evaluates one expression in a fresh interpreter.
Status evalIn(Interpreter& interpreter, const std::string& source) {
  return interpreter.eval(source, "t.mesh");
}

std::string valueOf(const std::string& source) {
  Interpreter interpreter;
  auto status = evalIn(interpreter, source);
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
  REQUIRE(status.value);
  return status.value->repr();
}

DiagnosticKind errorOf(const std::string& source) {
  Interpreter interpreter;
  auto status = evalIn(interpreter, source);
  REQUIRE_FALSE(status.ok);
  REQUIRE(!status.diagnostics.empty());
  return status.diagnostics[0].kind;
}

}  // namespace

TEST_CASE("integer arithmetic is checked and rounds like Python", "[values]") {
  CHECK(valueOf("7 // 2") == "3");
  CHECK(valueOf("-7 // 2") == "-4");
  CHECK(valueOf("-7 % 3") == "2");
  CHECK(valueOf("7 % -3") == "-2");
  CHECK(valueOf("2 ** 62") == "4611686018427387904");
  CHECK(valueOf("1 / 4") == "0.25");
  CHECK(valueOf("2 ** -1") == "0.5");
  CHECK(errorOf("2 ** 63") == DiagnosticKind::IntegerOverflow);
  CHECK(errorOf("9223372036854775807 + 1") == DiagnosticKind::IntegerOverflow);
  CHECK(errorOf("-9223372036854775807 - 2") == DiagnosticKind::IntegerOverflow);
  CHECK(errorOf("1 // 0") == DiagnosticKind::DivisionByZero);
  CHECK(errorOf("1.0 / 0") == DiagnosticKind::DivisionByZero);
}

TEST_CASE("quantities carry dimensions", "[values]") {
  CHECK(valueOf("80GB / 450GB/s") == "177.778 ms");
  CHECK(valueOf("2.6GB / 1GB") == "2.6");
  CHECK(valueOf("1TFLOP / 1TFLOPS") == "1 s");
  CHECK(valueOf("16GiB") == "16 GiB");
  CHECK(valueOf("25Gb/s") == "3.125 GB/s");
  CHECK(valueOf("2 * 3us") == "6 us");
  CHECK(valueOf("float(1KB)") == "1000.0");
  CHECK(valueOf("1GB < 2GB") == "true");
  CHECK(errorOf("80GB + 2us") == DiagnosticKind::UnitMismatch);
  CHECK(errorOf("80GB + 1") == DiagnosticKind::UnitMismatch);
  CHECK(errorOf("1s < 1GB") == DiagnosticKind::UnitMismatch);
}

TEST_CASE("unit table and printing", "[values]") {
  auto unit = interp::lookupUnit("GiB/s");
  REQUIRE(unit);
  CHECK(unit->scale == 1073741824.0);
  CHECK(unit->dimension == Dimension{1, -1, 0});
  CHECK_FALSE(interp::lookupUnit("TFLOPS/s"));
  CHECK_FALSE(interp::lookupUnit("s/s"));
  CHECK(interp::formatQuantity(3, Dimension{1, 1, 0}) == "3 B*s");
  CHECK(interp::formatQuantity(0.5, Dimension{0, -2, 0}) == "0.5 1/s^2");
  CHECK(interp::formatFloat(3) == "3.0");
  CHECK(interp::formatFloat(1e300) == "1e+300");
}

TEST_CASE("values compare and print", "[values]") {
  CHECK(valueOf("[1, 2.0, \"a\"] == [1, 2, \"a\"]") == "true");
  CHECK(valueOf("{a: 1, b: [2]}") == "{a: 1, b: [2]}");
  CHECK(valueOf("\"tab\\there\"") == "\"tab\\there\"");
  CHECK(valueOf("len(\"héllo\")") == "5");
  CHECK(valueOf("\"héllo\"[1]") == "\"é\"");
  CHECK(valueOf("list(0..3)") == "[0, 1, 2]");
  CHECK(valueOf("range(10, 0, -3)[2]") == "4");
  CHECK(valueOf("max([3, 1, 4])") == "4");
  CHECK(valueOf("[3, 1, 2].sorted()") == "[1, 2, 3]");
  CHECK(valueOf("\"a,b\".split(\",\")") == "[\"a\", \"b\"]");
  CHECK(errorOf("[1][5]") == DiagnosticKind::IndexOutOfRange);
  CHECK(errorOf("\"a\" + 1") == DiagnosticKind::TypeMismatch);
  CHECK(errorOf("if 1 { }") == DiagnosticKind::TypeMismatch);
}

TEST_CASE("a list that contains itself prints and dies without recursion trouble", "[values]") {
  Interpreter interpreter;
  auto status = evalIn(interpreter, "var xs = [1]\nxs.append(xs)\nstr(xs)");
  REQUIRE(status.ok);
  CHECK(status.value->str().find("[...]") != std::string::npos);
}

TEST_CASE("deeply nested values are destroyed without deep recursion", "[values]") {
  Interpreter interpreter;
  auto status = evalIn(interpreter, "var x = []\nfor i in 0..300000 { x = [x] }\nx = none\n1");
  INFO(renderAll(status.diagnostics));
  CHECK(status.ok);
}

TEST_CASE("memory held by values is accounted and released", "[values]") {
  Config config;
  config.limits.maxMemoryBytes = 4 << 20;
  Interpreter interpreter(config);
  // Each iteration builds ~800 KB and drops it: the total never passes the limit.
  auto ok = evalIn(interpreter, "for i in 0..20 { let big = list(0..25000) }\n1");
  INFO(renderAll(ok.diagnostics));
  CHECK(ok.ok);
  auto tooMuch = evalIn(interpreter, "let huge = list(0..1000000)");
  REQUIRE_FALSE(tooMuch.ok);
  CHECK(tooMuch.diagnostics[0].kind == DiagnosticKind::MemoryLimit);
  auto repeat = evalIn(interpreter, "let s = \"ab\" * 100000000");
  REQUIRE_FALSE(repeat.ok);
  CHECK(repeat.diagnostics[0].kind == DiagnosticKind::MemoryLimit);
}
