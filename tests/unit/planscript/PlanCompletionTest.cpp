// The REPL completes plan(...), simulate(...) and a plan's fields and methods.
#include <algorithm>
#include <catch2/catch.hpp>

#include "meshflow/meshflow.h"

using namespace meshflow;

namespace {

using Names = std::vector<std::string>;

bool contains(const Names& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

TEST_CASE("plan and simulate complete, and so do a plan's members", "[planscript]") {
  Interpreter interpreter;
  CHECK(contains(complete(interpreter, "pla", 3), "plan"));
  CHECK(complete(interpreter, "simu", 4) == Names{"simulate"});
  Status status = interpreter.eval(
      "import std.models\n"
      "let p = plan(gpt(layers = 1, hidden = 32, heads = 2, seq = 8, vocab = 32), cpu(devices = "
      "2), "
      "batch = 2)",
      "t.mesh");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
  CHECK(complete(interpreter, "p.ex", 4) == Names{"explain"});
  CHECK(complete(interpreter, "p.save", 6) == Names{"save", "save_trace"});
  CHECK(complete(interpreter, "p.st", 4) == Names{"stages", "step_time"});
  Names all = complete(interpreter, "p.", 2);
  for (const char* name : {"alpa_specs", "jax_specs", "megatron", "timeline", "microbatches", "mfu",
                           "peak_memory", "samples_per_s", "schedule", "tflops_per_device"})
    CHECK(contains(all, name));
}
