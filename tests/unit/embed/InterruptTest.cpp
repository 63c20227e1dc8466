// Interpreter::interrupt: a host's Ctrl-C stops a loop at its next step and
// training between two steps, naming the latest checkpoint.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

namespace fs = std::filesystem;

TEST_CASE("interrupt stops training between steps and names the latest checkpoint",
          "[embed][interrupt]") {
  fs::path folder = fs::temp_directory_path() / "meshflow-interrupt-test";
  fs::remove_all(folder);
  fs::create_directories(folder);
  Interpreter* self = nullptr;
  std::string printed;
  Config config;
  config.files.writeRoots.push_back(folder.string());
  config.files.readRoots.push_back(folder.string());
  // The host presses Ctrl-C as the third step's line appears.
  config.write = [&](std::string_view text) {
    printed += text;
    if (text.find("step    3") != std::string_view::npos) self->interrupt();
  };
  Interpreter interpreter(config);
  self = &interpreter;
  Status status = interpreter.eval(
      "model classifier() {\n"
      "  let x = input(\"x\", f32[batch, 8])\n"
      "  let labels = input(\"labels\", i32[batch])\n"
      "  return cross_entropy(linear(x, 4, name = \"fc\"), labels)\n"
      "}\n"
      "var before = 1\n"
      "train(classifier, batch = 4, steps = 1000, log_every = 1, every = 2,\n"
      "      checkpoint = \"" +
          (folder / "ckpt").string() + "\")\n",
      "interrupt.mesh");
  INFO(printed);
  REQUIRE_FALSE(status.ok);
  REQUIRE(status.diagnostics.size() == 1);
  CHECK(status.diagnostics[0].kind == DiagnosticKind::Interrupted);
  CHECK(status.diagnostics[0].message ==
        "training 'classifier' interrupted before step 4 of 1000; the latest checkpoint is "
        "step 2 in " +
            (folder / "ckpt").string() + " (train again to resume)");
  // What ran before stays, and the interpreter goes on.
  CHECK(interpreter.global("before")->asInt() == 1);
  CHECK(interpreter.eval("before + 1").value->asInt() == 2);
  fs::remove_all(folder);
}

}  // namespace
}  // namespace meshflow
