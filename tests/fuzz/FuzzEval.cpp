// libFuzzer target: parse and evaluate arbitrary bytes. Any crash, sanitizer
// report, hang or escaped exception is a bug; diagnostics are the expected outcome.
//
// Fast by design (CONTRIBUTING.md, "Fuzzing"): every input gets a new
// interpreter, so nothing one input defines reaches the next, but the
// interpreters share successful parses (Config::parsedModules: the modules they
// import, and the input itself between eval() and check()), and the budgets are
// small, since a mutated loop or recursion otherwise runs until a large budget
// stops it.
//
// A source with a syntax error runs nothing: eval() would only parse it and
// return the diagnostics, and working those out is ANTLR's parse, ten times
// the direct parser's (grammar/DirectParser.h) and, without this, half of this
// target's time. fuzz_parse runs that same grammar::parse on every input and
// checks it against the ANTLR front end alone, so this target takes only the
// sources that parse, and leaves the others to it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/Parser.h"
#include "interp/ParsedModules.h"
#include "meshflow/meshflow.h"

namespace {

constexpr const char* kName = "fuzz.mesh";

const std::shared_ptr<meshflow::interp::ParsedModules>& sharedParses() {
  static const auto parsed = std::make_shared<meshflow::interp::ParsedModules>();
  return parsed;
}

meshflow::Config fuzzingConfig() {
  meshflow::Config config;
  config.write = [](std::string_view) {};
  // Hitting a budget is a diagnostic, not a failure.
  config.limits.maxSteps = 2'000;
  config.limits.maxCallDepth = 32;
  config.limits.maxMemoryBytes = 4u << 20;
  config.parsedModules = sharedParses();
  return config;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto program = meshflow::grammar::parseClean(
      std::make_shared<meshflow::interp::SourceFile>(kName, source));
  if (!program) return 0;
  // eval() and check() take this parse.
  sharedParses()->remember(kName, source, std::move(program));
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
  interpreter.eval(source, kName);
  // check() follows the imports without running them (without an import it
  // would add nothing).
  if (source.find("import") != std::string::npos) interpreter.check(source, kName);
  // Nothing of this input stays: libFuzzer runs an input again under
  // LeakSanitizer whenever it allocated more than it freed.
  sharedParses()->forget(kName);
  return 0;
}
