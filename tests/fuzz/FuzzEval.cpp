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
  std::string_view source(reinterpret_cast<const char*>(data), size);
  interpreter.eval(source, "fuzz.mesh");
  interpreter.check(source, "fuzz.mesh");
  return 0;
}
