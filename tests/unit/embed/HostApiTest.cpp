// The embedding API as a host uses it: host functions with arguments and
// errors, globals, calls, diagnostics callbacks, recovery after errors, limits.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

Config quiet() {
  Config config;
  config.write = [](std::string_view) {};
  return config;
}

TEST_CASE("a host function receives positional and keyword arguments", "[embed][host]") {
  Interpreter interp(quiet());
  std::vector<std::string> seen;
  interp.defineFunction("scale", {"x", "factor"}, [&seen](HostCall& call) {
    seen.push_back(call[0].repr() + " " + call[1].repr());
    REQUIRE(call.size() == 2);
    return Value::integer(call[0].asInt() * call[1].asInt());
  });
  CHECK(interp.eval("scale(3, 4)").value->asInt() == 12);
  CHECK(interp.eval("scale(factor = 5, x = 2)").value->asInt() == 10);
  CHECK(interp.eval("fn twice(v) = scale(v, 2)\ntwice(21)").value->asInt() == 42);
  CHECK(seen == std::vector<std::string>{"3 4", "2 5", "21 2"});
}

TEST_CASE("a host function sees the interpreter's user data", "[embed][host]") {
  int counter = 0;
  Config config = quiet();
  config.userData = &counter;
  Interpreter interp(config);
  interp.defineFunction("count", {}, [](HostCall& call) {
    int& c = *static_cast<int*>(call.userData());
    return Value::integer(++c);
  });
  REQUIRE(interp.eval("count()\ncount()\ncount()"));
  CHECK(counter == 3);
}

TEST_CASE("a wrong number of arguments to a host function is a diagnostic", "[embed][host]") {
  Interpreter interp(quiet());
  bool called = false;
  interp.defineFunction("one", {"x"}, [&called](HostCall&) {
    called = true;
    return Value::none();
  });
  Status status = interp.eval("one(1, 2)");
  REQUIRE_FALSE(status);
  CHECK(status.diagnostics[0].kind == DiagnosticKind::ArgumentCount);
  CHECK_FALSE(called);
  CHECK(interp.eval("one(y = 1)").diagnostics.at(0).kind == DiagnosticKind::UnknownArgument);
}

TEST_CASE("a host that throws std::runtime_error gives a HostError diagnostic", "[embed][host]") {
  Interpreter interp(quiet());
  interp.defineFunction("device", {"name"}, [](HostCall& call) -> Value {
    throw std::runtime_error("no device named " + call[0].str());
  });
  Status status = interp.eval("let a = 1\nlet d = device(\"tpu\")", "host.mesh");
  REQUIRE_FALSE(status);
  REQUIRE(status.diagnostics.size() == 1);
  const Diagnostic& d = status.diagnostics[0];
  CHECK(d.kind == DiagnosticKind::HostError);
  CHECK(d.message == "device: no device named tpu");
  CHECK(d.file == "host.mesh");
  CHECK(d.line == 1);  // 0-based: the second line, where device() is called
  CHECK(d.render().find("host.mesh:2:") == 0);
  // Statements before the error ran; the failed one did not bind.
  CHECK(interp.global("a"));
  CHECK_FALSE(interp.global("d"));
}

TEST_CASE("a host that throws ScriptError chooses the diagnostic kind", "[embed][host]") {
  Interpreter interp(quiet());
  interp.defineFunction("positive", {"x"}, [](HostCall& call) {
    if (!call[0].isInt())
      throw ScriptError(DiagnosticKind::TypeMismatch, "positive() needs an int");
    if (call[0].asInt() <= 0) throw ScriptError(DiagnosticKind::InvalidValue, "not positive");
    return call[0];
  });
  CHECK(interp.eval("positive(\"x\")").diagnostics.at(0).kind == DiagnosticKind::TypeMismatch);
  CHECK(interp.eval("positive(-1)").diagnostics.at(0).kind == DiagnosticKind::InvalidValue);
  CHECK(interp.eval("positive(7)").value->asInt() == 7);
}

TEST_CASE("getGlobal, setGlobal and call", "[embed][globals]") {
  Interpreter interp(quiet());
  CHECK_FALSE(interp.global("missing"));
  interp.setGlobal("batch", Value::integer(16));
  interp.setGlobal("names", Value::list({Value::string("a"), Value::string("b")}));
  REQUIRE(interp.eval("let per_device = batch // 8\nfn label(i) = names[i] + \"!\""));
  CHECK(interp.global("per_device")->asInt() == 2);
  // The host can change a global it set; the script sees the new value.
  interp.setGlobal("batch", Value::integer(64));
  CHECK(interp.eval("batch // 8").value->asInt() == 8);
  // A script binding can be replaced by the host, even a `let`.
  interp.setGlobal("per_device", Value::integer(100));
  CHECK(interp.global("per_device")->asInt() == 100);

  Status byName = interp.call("label", {Value::integer(1)});
  REQUIRE(byName);
  CHECK(byName.value->asString() == "b!");
  Status byValue = interp.call(*interp.global("label"), {Value::integer(0)});
  CHECK(byValue.value->asString() == "a!");
  Status builtin = interp.call("len", {Value::list({Value::none(), Value::none()})});
  CHECK(builtin.value->asInt() == 2);

  Status missing = interp.call("nope", {});
  REQUIRE_FALSE(missing);
  CHECK(missing.diagnostics[0].kind == DiagnosticKind::UnknownName);
  Status wrongCount = interp.call("label", {});
  REQUIRE_FALSE(wrongCount);
  CHECK(wrongCount.diagnostics[0].kind == DiagnosticKind::ArgumentCount);
  Status notCallable = interp.call("batch", {});
  REQUIRE_FALSE(notCallable);
  CHECK(notCallable.diagnostics[0].kind == DiagnosticKind::NotCallable);
  Status failing = interp.call("label", {Value::integer(5)});
  REQUIRE_FALSE(failing);
  CHECK(failing.diagnostics[0].kind == DiagnosticKind::IndexOutOfRange);
}

TEST_CASE("eval after an error keeps working", "[embed][recovery]") {
  Interpreter interp(quiet());
  REQUIRE(interp.eval("var x = 1"));
  Status syntax = interp.eval("let = = 3");
  CHECK_FALSE(syntax);
  CHECK(syntax.diagnostics[0].kind == DiagnosticKind::SyntaxError);
  Status runtime = interp.eval("x = x + 1\nlet y = x // 0");
  CHECK(runtime.diagnostics.at(0).kind == DiagnosticKind::DivisionByZero);
  CHECK(interp.global("x")->asInt() == 2);  // the statement before the error ran
  Status overflow = interp.eval("9223372036854775807 + 1");
  CHECK(overflow.diagnostics.at(0).kind == DiagnosticKind::IntegerOverflow);
  Status fine = interp.eval("x * 21");
  REQUIRE(fine);
  CHECK(fine.value->asInt() == 42);
  CHECK(fine.diagnostics.empty());
}

TEST_CASE("the diagnostic callback sees every diagnostic the Status holds", "[embed][recovery]") {
  std::vector<std::string> reported;
  Config config = quiet();
  config.diagnostic = [&reported](const Diagnostic& d) { reported.push_back(d.render()); };
  Interpreter interp(config);
  Status status = interp.eval("let a = )\nlet b = (", "two.mesh");
  REQUIRE(status.diagnostics.size() >= 2);
  REQUIRE(reported.size() == status.diagnostics.size());
  for (std::size_t i = 0; i < reported.size(); ++i)
    CHECK(reported[i] == status.diagnostics[i].render());
  CHECK(status.diagnostics[0].line == 0);
  CHECK(status.diagnostics[1].line == 1);
}

TEST_CASE("the output callback receives what print writes", "[embed][output]") {
  std::string out;
  Config config;
  config.write = [&out](std::string_view text) { out += text; };
  Interpreter interp(config);
  REQUIRE(interp.eval("print(\"a\", 1, [2], 4GB)\nprint()\nprint(\"done\")"));
  CHECK(out.find("a 1 [2] ") == 0);
  CHECK(out.substr(out.size() - 6) == "\ndone\n");
}

TEST_CASE("Config limits are honoured", "[embed][limits]") {
  SECTION("steps") {
    Config config = quiet();
    config.limits.maxSteps = 500;
    Interpreter interp(config);
    Status status = interp.eval("while true { }");
    REQUIRE_FALSE(status);
    CHECK(status.diagnostics[0].kind == DiagnosticKind::StepLimit);
    CHECK(status.diagnostics[0].message.find("500") != std::string::npos);
    // The budget is per eval: a short input afterwards runs.
    CHECK(interp.eval("1 + 1").value->asInt() == 2);
  }
  SECTION("call depth") {
    Config config = quiet();
    config.limits.maxCallDepth = 20;
    Interpreter interp(config);
    REQUIRE(interp.eval("fn down(n) = if_zero(n)\nfn if_zero(n) = down(n + 1)"));
    Status status = interp.eval("down(0)");
    REQUIRE_FALSE(status);
    CHECK(status.diagnostics[0].kind == DiagnosticKind::CallDepthLimit);
    CHECK(status.diagnostics[0].message.find("20") != std::string::npos);
    Status viaCall = interp.call("down", {Value::integer(0)});
    CHECK(viaCall.diagnostics.at(0).kind == DiagnosticKind::CallDepthLimit);
  }
  SECTION("memory") {
    Config config = quiet();
    config.limits.maxMemoryBytes = 64 * 1024;
    Interpreter interp(config);
    Status status = interp.eval("var xs = []\nfor i in 0..100000 { xs = xs + [i] }");
    REQUIRE_FALSE(status);
    CHECK(status.diagnostics[0].kind == DiagnosticKind::MemoryLimit);
    REQUIRE(interp.eval("xs = []"));  // gives the memory back
    Status big = interp.eval("var s = \"x\"\nfor i in 0..30 { s = s + s }");
    REQUIRE_FALSE(big);
    CHECK(big.diagnostics[0].kind == DiagnosticKind::MemoryLimit);
    REQUIRE(interp.eval("s = \"\""));
    CHECK(interp.eval("[1, 2, 3]").value->items().size() == 3);
  }
}

}  // namespace
}  // namespace meshflow
