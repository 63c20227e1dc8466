// docs/tutorial.md shows code and what it prints; this runs its ```mesh blocks
// in order as one session and checks that its ```text blocks are exactly what
// they print, so the page cannot drift. On a failure it prints the actual output.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

struct Blocks {
  std::string code, output;
};

// The fenced blocks of `markdown`: ```mesh into code, ```text into output.
Blocks fencedBlocks(const std::string& markdown) {
  Blocks blocks;
  std::istringstream lines(markdown);
  std::string line, *into = nullptr;
  while (std::getline(lines, line)) {
    if (into == nullptr && line == "```mesh")
      into = &blocks.code;
    else if (into == nullptr && line == "```text")
      into = &blocks.output;
    else if (into != nullptr && line == "```")
      into = nullptr;
    else if (into != nullptr)
      *into += line + "\n";
  }
  return blocks;
}

TEST_CASE("docs/tutorial.md prints what it shows", "[embed][docs]") {
  std::ifstream in(std::string(MESHFLOW_SOURCE_DIR) + "/docs/tutorial.md");
  REQUIRE(in);
  std::stringstream text;
  text << in.rdbuf();
  Blocks blocks = fencedBlocks(text.str());
  std::string printed;
  Config config;
  config.write = [&printed](std::string_view out) { printed += out; };
  Interpreter interpreter(config);
  Status status = interpreter.eval(blocks.code, "docs/tutorial.md");
  INFO(renderAll(status.diagnostics));
  CHECK(status.ok);
  INFO("what the tutorial's code prints:\n" << printed);
  CHECK(printed == blocks.output);
}

}  // namespace
}  // namespace meshflow
