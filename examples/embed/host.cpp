// A host program that embeds the meshflow interpreter (docs/embedding.md walks
// through it). It captures what scripts print, gives scripts a function of its
// own, runs a script, reads a global, calls a script function, and shows how an
// error comes back as a diagnostic instead of an exception or an abort.
#include <cstdint>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>

#include "meshflow/meshflow.h"

namespace {

// What the host knows and the script asks for: device memory by model name.
meshflow::Value deviceMemory(meshflow::HostCall& call) {
  const meshflow::Value& name = call[0];
  if (!name.isString())
    throw meshflow::ScriptError(
        meshflow::DiagnosticKind::TypeMismatch,
        "device_memory() needs a device name string, got a " + name.typeName());
  const meshflow::Dimension bytes{1, 0, 0};
  if (name.asString() == "A100-80GB") return meshflow::Value::quantity(80e9, bytes);
  if (name.asString() == "V100-16GB") return meshflow::Value::quantity(16e9, bytes);
  // Any std::exception becomes a HostError diagnostic at the script's call site.
  throw std::runtime_error("unknown device '" + name.asString() + "'");
}

constexpr const char* kScript = R"(# sizing.mesh: a script the host runs
let devices = 8
let memory = device_memory("A100-80GB")
fn per_device(batch) = batch // devices
fn fits(params) = params * 16B <= memory
print("cluster memory:", devices * memory)
)";

// `meshflow_embed_example --where` says which meshflow the host runs: its
// version and the stdlib folder `import std.x` reads (beside the installed
// library, for a host built against an installed package).
int printWhere() {
  meshflow::Interpreter interpreter;
  meshflow::Status imported = interpreter.eval("import std.clusters", "where.mesh");
  std::cout << "meshflow " << meshflow::version() << "\n"
            << "stdlib " << interpreter.config().stdlibDir << "\n"
            << "import std.clusters " << (imported ? "ok" : "failed") << "\n"
            << meshflow::renderAll(imported.diagnostics);
  return imported ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--where") return printWhere();
  // 1. Configure: everything the script prints lands in `captured`.
  std::string captured;
  meshflow::Config config;
  config.write = [&captured](std::string_view text) { captured += text; };
  config.limits.maxSteps = 1'000'000;  // a runaway script stops with a diagnostic
  meshflow::Interpreter interpreter(config);

  // 2. Register a host function: scripts call it like a builtin.
  interpreter.defineFunction("device_memory", {"name"}, deviceMemory);

  // 3. Evaluate a script; its definitions persist in the interpreter.
  meshflow::Status status = interpreter.eval(kScript, "sizing.mesh");
  if (!status) {
    std::cerr << meshflow::renderAll(status.diagnostics);
    return 1;
  }
  std::cout << "script printed: " << captured;

  // 4. Read globals the script defined.
  std::optional<meshflow::Value> devices = interpreter.global("devices");
  std::cout << "devices = " << devices->asInt() << "\n";
  std::cout << "memory = " << interpreter.global("memory")->repr() << "\n";

  // 5. Call script functions with host values.
  meshflow::Status perDevice = interpreter.call("per_device", {meshflow::Value::integer(1024)});
  std::cout << "per_device(1024) = " << perDevice.value->repr() << "\n";
  for (std::int64_t params : {std::int64_t{1'000'000'000}, std::int64_t{10'000'000'000}}) {
    meshflow::Status fits = interpreter.call("fits", {meshflow::Value::integer(params)});
    std::cout << "fits(" << params << ") = " << fits.value->repr() << "\n";
  }

  // 6. Errors come back as diagnostics: from a host function that throws...
  meshflow::Status unknown = interpreter.eval("device_memory(\"TPU-v4\")", "query.mesh");
  std::cout << "ok = " << (unknown.ok ? "true" : "false") << "\n"
            << meshflow::renderAll(unknown.diagnostics);
  // ...from the script itself...
  meshflow::Status typo = interpreter.eval("per_devise(64)", "query.mesh");
  std::cout << meshflow::renderAll(typo.diagnostics);
  // ...and from a call with the wrong arguments.
  meshflow::Status wrong = interpreter.call("per_device", {});
  std::cout << meshflow::renderAll(wrong.diagnostics);

  // 7. After an error the interpreter is still usable.
  meshflow::Status after = interpreter.eval("per_device(64)", "query.mesh");
  std::cout << "after the errors: per_device(64) = " << after.value->repr() << "\n";
  return after ? 0 : 1;
}
