#include <unistd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "interp/ParsedModules.h"
#include "meshflow/meshflow.h"

using namespace meshflow;

namespace {

namespace fs = std::filesystem;

// A module folder of its own, removed at the end.
struct ModuleFolder {
  fs::path path = fs::temp_directory_path() / ("meshflow-parsed-" + std::to_string(::getpid()));
  ModuleFolder() { fs::create_directories(path); }
  ~ModuleFolder() { fs::remove_all(path); }
  void write(const std::string& text) const { std::ofstream(path / "counter.mesh") << text; }
};

std::string run(const std::shared_ptr<interp::ParsedModules>& parsed, const ModuleFolder& folder,
                const std::string& source) {
  std::string printed;
  Config config;
  config.write = [&printed](std::string_view text) { printed += text; };
  config.importRoots = {folder.path.string()};
  config.parsedModules = parsed;
  Interpreter interpreter(config);
  auto status = interpreter.eval(source, "<test>");
  REQUIRE(status.ok);
  return printed;
}

}  // namespace

TEST_CASE("interpreters sharing parsed modules share the parse, not the module's values",
          "[modules]") {
  ModuleFolder folder;
  folder.write("var seen = []\nfn remember(x) {\n  seen.append(x)\n  return len(seen)\n}\n");
  auto parsed = std::make_shared<interp::ParsedModules>();
  const std::string script = "import counter\nprint(remember(1), remember(2))\n";
  CHECK(run(parsed, folder, script) == "1 2\n");
  const auto path = fs::weakly_canonical(folder.path / "counter.mesh").string();
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto first = parsed->find(path, text);
  REQUIRE(first != nullptr);
  // The second interpreter runs the module afresh: its list starts empty.
  CHECK(run(parsed, folder, script) == "1 2\n");
  CHECK(parsed->find(path, text) == first);
  // An edited module is parsed again.
  folder.write("fn remember(x) = x * 10\n");
  CHECK(run(parsed, folder, script) == "10 20\n");
  CHECK(parsed->find(path, text) == nullptr);
}

TEST_CASE("a source parsed by eval is shared with check and later interpreters, a failed one is not",
          "[modules]") {
  ModuleFolder folder;
  folder.write("fn remember(x) = x\n");
  auto parsed = std::make_shared<interp::ParsedModules>();
  const std::string script = "import counter\nprint(remember(3))\n";
  CHECK(run(parsed, folder, script) == "3\n");
  const auto program = parsed->find("<test>", script);
  REQUIRE(program != nullptr);
  Config config;
  config.importRoots = {folder.path.string()};
  config.parsedModules = parsed;
  Interpreter interpreter(config);
  CHECK(interpreter.check(script, "<test>").ok);
  CHECK(parsed->find("<test>", script) == program);
  // Another name is another file: its own parse, its own diagnostics' file name.
  CHECK(interpreter.check(script, "<other>").ok);
  CHECK(parsed->find("<other>", script) != program);
  // A parse that fails is not kept: the next eval reports its errors again.
  const std::string broken = "let = 1\n";
  auto first = interpreter.eval(broken, "<test>");
  auto second = interpreter.eval(broken, "<test>");
  CHECK(!first.ok);
  CHECK(parsed->find("<test>", broken) == nullptr);
  REQUIRE(second.diagnostics.size() == first.diagnostics.size());
  CHECK(renderAll(second.diagnostics) == renderAll(first.diagnostics));
}

TEST_CASE("a forgotten parse is not found again", "[parsed-modules]") {
  interp::ParsedModules parsed;
  auto program = std::make_shared<ast::Program>();
  parsed.remember("a.mesh", "x = 1", program);
  parsed.remember("b.mesh", "y = 2", program);
  CHECK(parsed.find("a.mesh", "x = 1") == program);
  parsed.forget("a.mesh");
  CHECK(parsed.find("a.mesh", "x = 1") == nullptr);
  CHECK(parsed.find("b.mesh", "y = 2") == program);
  parsed.forget("missing.mesh");  // nothing to drop
}
