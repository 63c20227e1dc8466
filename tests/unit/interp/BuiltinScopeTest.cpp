// Interpreters share their builtins (interp/Builtins.h, makeBuiltinScope); what
// a script can change of them stays its interpreter's own.
#include <catch2/catch.hpp>

#include "meshflow/meshflow.h"

using namespace meshflow;

namespace {

std::string valueIn(Interpreter& interpreter, const std::string& source) {
  auto status = interpreter.eval(source, "t.mesh");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
  REQUIRE(status.value);
  return status.value->repr();
}

void run(Interpreter& interpreter, const std::string& source) {
  auto status = interpreter.eval(source, "t.mesh");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
}

}  // namespace

TEST_CASE("a change to the math record stays in its interpreter", "[builtins]") {
  Interpreter first, second;
  run(first, "math.pi = 3");
  run(first, "math.extra = 1");
  CHECK(valueIn(first, "math.pi") == "3");
  CHECK(valueIn(second, "math.pi") == "3.141592653589793");
  Interpreter third;
  CHECK(valueIn(third, "math.pi") == "3.141592653589793");
  auto missing = third.eval("math.extra", "t.mesh");
  CHECK_FALSE(missing.ok);
}

TEST_CASE("a builtin cannot be reassigned, and a definition over one is the interpreter's own",
          "[builtins]") {
  Interpreter first, second;
  CHECK_FALSE(first.eval("sqrt = 1", "t.mesh").ok);
  run(first, "let len = 5");
  CHECK(valueIn(first, "len") == "5");
  CHECK(valueIn(second, "len([1, 2])") == "2");
  CHECK(valueIn(second, "math.sqrt(4.0) == sqrt(4.0)") == "true");
}
