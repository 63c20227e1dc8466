// Two interpreters in one process share nothing: globals, output callbacks and
// limits stay each interpreter's own, also when each runs on its own thread.
#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

Config capturing(std::string& output) {
  Config config;
  config.write = [&output](std::string_view text) { output += text; };
  return config;
}

TEST_CASE("two interpreters keep their own globals and output", "[embed][isolation]") {
  std::string outA, outB;
  Interpreter a(capturing(outA));
  Interpreter b(capturing(outB));
  REQUIRE(a.eval("let name = \"a\"\nvar count = 1\nfn who() = name"));
  REQUIRE(b.eval("let name = \"b\"\nfn only_in_b() = 2"));
  REQUIRE(a.eval("count = count + 1\nprint(who(), count)"));
  REQUIRE(b.eval("print(name)"));
  CHECK(outA == "a 2\n");
  CHECK(outB == "b\n");
  CHECK_FALSE(b.global("count"));
  CHECK_FALSE(a.global("only_in_b"));
  CHECK(a.global("name")->asString() == "a");
  CHECK(b.global("name")->asString() == "b");
  // The same name defined in both is no redefinition in either.
  CHECK(b.eval("let count = 10"));
  CHECK(a.global("count")->asInt() == 2);
}

TEST_CASE("host functions belong to the interpreter that registered them", "[embed][isolation]") {
  Interpreter a, b;
  a.defineFunction("tag", {}, [](HostCall&) { return Value::string("from a"); });
  CHECK(a.call("tag", {}).value->asString() == "from a");
  Status inB = b.eval("tag()");
  CHECK_FALSE(inB);
  REQUIRE(inB.diagnostics.size() == 1);
  CHECK(inB.diagnostics[0].kind == DiagnosticKind::UnknownName);
}

TEST_CASE("limits are per interpreter", "[embed][isolation][limits]") {
  Config tight;
  tight.limits.maxSteps = 1000;
  tight.limits.maxCallDepth = 10;
  Interpreter small(tight);
  Interpreter large;
  const char* loop = "var total = 0\nfor i in 0..5000 { total = total + i }\ntotal";
  Status inSmall = small.eval(loop);
  REQUIRE_FALSE(inSmall);
  CHECK(inSmall.diagnostics[0].kind == DiagnosticKind::StepLimit);
  Status inLarge = large.eval(loop);
  REQUIRE(inLarge);
  CHECK(inLarge.value->asInt() == 5000 * 4999 / 2);

  const char* recursion = "fn depth(n) { if n == 0 { return 0 }\n return 1 + depth(n - 1) }\n";
  REQUIRE(small.eval(recursion));
  REQUIRE(large.eval(recursion));
  Status deepSmall = small.eval("depth(50)");
  REQUIRE_FALSE(deepSmall);
  CHECK(deepSmall.diagnostics[0].kind == DiagnosticKind::CallDepthLimit);
  CHECK(large.eval("depth(50)").value->asInt() == 50);
}

// Each thread owns one interpreter and evaluates many inputs; the results and
// the printed text must be exactly what that interpreter alone would produce.
void workload(Interpreter& interp, const std::string& id, int rounds, std::string& failures) {
  auto fail = [&](const std::string& what) { failures += id + ": " + what + "\n"; };
  if (!interp.eval("var n = 0\nfn bump(k) { n = n + k\n return n }\nlet id = \"" + id + "\""))
    fail("setup");
  for (int i = 1; i <= rounds; ++i) {
    Status status = interp.eval("print(id, bump(1))\n[id, n * 2]", "round.mesh");
    if (!status || !status.value) {
      fail("round " + std::to_string(i) + ": " + renderAll(status.diagnostics));
      continue;
    }
    std::string expected = "[\"" + id + "\", " + std::to_string(2 * i) + "]";
    if (status.value->repr() != expected) fail("value " + status.value->repr());
    // An error now and then must not disturb the next round.
    if (i % 50 == 0 && interp.eval("1 // 0").ok) fail("no division error");
  }
  Status last = interp.call("bump", {Value::integer(0)});
  if (!last || last.value->asInt() != rounds) fail("final count");
}

TEST_CASE("two interpreters on two threads do not interfere", "[embed][isolation][threads]") {
  constexpr int kRounds = 300;
  std::string outA, outB, failuresA, failuresB;
  Interpreter a(capturing(outA));
  Config configB = capturing(outB);
  configB.limits.maxSteps = 100'000;  // different limits on the other thread
  Interpreter b(configB);
  std::thread threadA([&] { workload(a, "a", kRounds, failuresA); });
  std::thread threadB([&] { workload(b, "b", kRounds, failuresB); });
  threadA.join();
  threadB.join();
  CHECK(failuresA.empty());
  CHECK(failuresB.empty());
  std::string expectedA, expectedB;
  for (int i = 1; i <= kRounds; ++i) {
    expectedA += "a " + std::to_string(i) + "\n";
    expectedB += "b " + std::to_string(i) + "\n";
  }
  CHECK(outA == expectedA);
  CHECK(outB == expectedB);
}

TEST_CASE("interpreters created and destroyed on several threads", "[embed][isolation][threads]") {
  std::string failures[4];
  std::thread threads[4];
  for (int t = 0; t < 4; ++t)
    threads[t] = std::thread([t, &failures] {
      for (int k = 0; k < 20; ++k) {
        std::string out;
        Interpreter interp(capturing(out));
        Status status = interp.eval("let xs = [1, 2, 3]\nfn f(x) = x * " + std::to_string(t) +
                                    "\nprint(f(len(xs)))\nf(2)");
        if (!status || status.value->asInt() != 2 * t || out != std::to_string(3 * t) + "\n")
          failures[t] += "thread " + std::to_string(t) + " round " + std::to_string(k) + "\n";
      }
    });
  for (auto& thread : threads) thread.join();
  for (const auto& failure : failures) CHECK(failure.empty());
}

}  // namespace
}  // namespace meshflow
