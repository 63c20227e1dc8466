// libFuzzer target: parse and evaluate arbitrary bytes. Any crash, sanitizer
// report, hang or escaped exception is a bug; diagnostics are the expected outcome.
//
// Fast by design (CONTRIBUTING.md, "Fuzzing"): every input gets a new
// interpreter, so nothing one input defines reaches the next, but the
// interpreters share the parses of the modules they import (Config::parsedModules:
// parsing std.models used to be most of an input's time), and the budgets are
// small, since a mutated loop or recursion otherwise runs until a large budget
// stops it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "interp/ParsedModules.h"
#include "meshflow/meshflow.h"

namespace {

meshflow::Config fuzzingConfig() {
  static auto parsed = std::make_shared<meshflow::interp::ParsedModules>();
  meshflow::Config config;
  config.write = [](std::string_view) {};
  // Hitting a budget is a diagnostic, not a failure.
  config.limits.maxSteps = 2'000;
  config.limits.maxCallDepth = 32;
  config.limits.maxMemoryBytes = 4u << 20;
  config.parsedModules = parsed;
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meshflow::Interpreter interpreter(fuzzingConfig());
  // Training runs real kernels and planning real solvers for as long as an
  // input asks: a mutated `steps = 10000` or a 3072-GPU cluster would read as a
  // hang. train(), plan() and simulate() are fuzzed through their golden tests
  // instead; here they are replaced by host functions that refuse.
  for (const char* name : {"train", "plan", "simulate"}) {
    interpreter.defineFunction(name, {"model"}, [name](meshflow::HostCall&) -> meshflow::Value {
      throw meshflow::ScriptError(meshflow::DiagnosticKind::HostError,
                                  std::string(name) + "() is off while fuzzing");
    });
  }
  std::string_view source(reinterpret_cast<const char*>(data), size);
  interpreter.eval(source, "fuzz.mesh");
  // check() parses as eval() did, then follows the imports: without one it
  // would only repeat eval's parse (a seventh of an input's time).
  if (source.find("import") != std::string_view::npos) interpreter.check(source, "fuzz.mesh");
  return 0;
}
