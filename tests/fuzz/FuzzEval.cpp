// libFuzzer target: parse and evaluate arbitrary bytes. Any crash, sanitizer
// report, hang or escaped exception is a bug; diagnostics are the expected outcome.
#include <cstddef>
#include <cstdint>
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
  // Training runs real kernels for as long as an input asks: a mutated
  // `steps = 10000` would read as a hang. train() is fuzzed through its
  // golden tests instead; here it is replaced by a host function that refuses.
  interpreter.defineFunction("train", {"model"}, [](meshflow::HostCall&) -> meshflow::Value {
    throw meshflow::ScriptError(meshflow::DiagnosticKind::HostError, "train() is off while fuzzing");
  });
  std::string_view source(reinterpret_cast<const char*>(data), size);
  interpreter.eval(source, "fuzz.mesh");
  interpreter.check(source, "fuzz.mesh");
  return 0;
}
