// libFuzzer target: parse and evaluate arbitrary bytes. Any crash, sanitizer
// report, hang or escaped exception is a bug; diagnostics are the expected outcome.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "meshflow/meshflow.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  meshflow::Config config;
  config.write = [](std::string_view) {};
  // Small budgets keep each input fast; hitting them is a diagnostic, not a failure.
  config.limits.maxSteps = 20'000;
  config.limits.maxCallDepth = 64;
  config.limits.maxMemoryBytes = 16u << 20;
  meshflow::Interpreter interpreter(config);
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
  interpreter.check(source, "fuzz.mesh");
  return 0;
}
