// meshflow::complete: keywords, names in scope, members after a dot, module
// exports, the cursor in mid-line, and odd input.
#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "meshflow/meshflow.h"

namespace meshflow {
namespace {

using Names = std::vector<std::string>;

bool contains(const Names& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

Interpreter quietInterpreter(Config config = {}) {
  config.write = [](std::string_view) {};
  return Interpreter(std::move(config));
}

TEST_CASE("keywords complete", "[completion]") {
  Interpreter interp(Config{});
  CHECK(complete(interp, "wh", 2) == Names{"while"});
  Names r = complete(interp, "re", 2);
  CHECK(contains(r, "return"));
  CHECK(complete(interp, "sched", 5) == Names{"schedule"});
  CHECK(complete(interp, "mod", 3) == Names{"model"});
}

TEST_CASE("globals and builtins complete, sorted and unique", "[completion]") {
  Interpreter interp(Config{});
  REQUIRE(interp.eval("let hidden = 1024\nvar hidden_size = 2\nfn helper() = 1"));
  CHECK(complete(interp, "hid", 3) == Names{"hidden", "hidden_size"});
  CHECK(complete(interp, "hel", 3) == Names{"helper"});
  CHECK(complete(interp, "pri", 3) == Names{"print"});
  Names l = complete(interp, "le", 2);
  CHECK(contains(l, "len"));
  CHECK(contains(l, "let"));
  CHECK(std::is_sorted(l.begin(), l.end()));
  CHECK(std::adjacent_find(l.begin(), l.end()) == l.end());
  CHECK(complete(interp, "no_such_prefix", 14).empty());
}

TEST_CASE("host functions and host globals complete", "[completion]") {
  Interpreter interp(Config{});
  interp.defineFunction("host_lookup", {"key"}, [](HostCall&) { return Value::none(); });
  interp.setGlobal("host_value", Value::integer(3));
  CHECK(complete(interp, "host_", 5) == Names{"host_lookup", "host_value"});
}

TEST_CASE("members complete after a dot", "[completion]") {
  Interpreter interp(Config{});
  REQUIRE(interp.eval("let r = {name: \"fc1\", size: 4, nested: {depth: 2}}"));
  CHECK(complete(interp, "r.na", 4) == Names{"name"});
  // Fields and the record's methods.
  CHECK(complete(interp, "r.", 2) == Names{"get", "has", "keys", "name", "nested", "size"});
  CHECK(complete(interp, "r.nested.de", 11) == Names{"depth"});
  CHECK(complete(interp, "print(r.si", 10) == Names{"size"});
  CHECK(complete(interp, "r.zz", 4).empty());
  CHECK(complete(interp, "unknown.na", 10).empty());
  CHECK(complete(interp, "r.size.x", 8).empty());  // an int has no fields
}

TEST_CASE("a module imported with `as` completes its public names", "[completion]") {
  namespace fs = std::filesystem;
  fs::path folder = fs::temp_directory_path() / "meshflow_completion_test";
  fs::create_directories(folder);
  std::ofstream(folder / "blocks.mesh") << "fn mlp(x) = x\nfn mlp_wide(x) = x\nlet _private = 1\n"
                                           "let width = 4\n";
  Config config;
  config.importRoots = {folder.string()};
  Interpreter interp = quietInterpreter(config);
  Status status = interp.eval("import \"blocks.mesh\" as blocks");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status);
  CHECK(complete(interp, "blocks.ml", 9) == Names{"mlp", "mlp_wide"});
  CHECK(complete(interp, "blocks.", 7) == Names{"mlp", "mlp_wide", "width"});
  CHECK(complete(interp, "blo", 3) == Names{"blocks"});
  fs::remove_all(folder);
}

TEST_CASE("the word ends at the cursor, not at the end of the line", "[completion]") {
  Interpreter interp(Config{});
  REQUIRE(interp.eval("let alpha = 1\nlet beta = 2\nlet r = {name: 1}"));
  std::string line = "alp + beta";
  CHECK(complete(interp, line, 3) == Names{"alpha"});
  CHECK(complete(interp, "f(r.na, 2)", 6) == Names{"name"});
  // The cursor after the word's first letter considers only that letter.
  Names b = complete(interp, "beta", 1);
  CHECK(contains(b, "beta"));
  CHECK(contains(b, "break"));
  // A cursor past the end is the end.
  CHECK(complete(interp, "alp", 100) == Names{"alpha"});
}

TEST_CASE("empty and odd input completes without crashing", "[completion]") {
  Interpreter interp(Config{});
  Names all = complete(interp, "", 0);
  CHECK(contains(all, "print"));
  CHECK(contains(all, "let"));
  CHECK(complete(interp, "   ", 3) == all);
  const std::vector<std::string> odds = {".",
                                         "..",
                                         "...",
                                         "a..b",
                                         "1.",
                                         ".x",
                                         "x.",
                                         "\"unterminated",
                                         "@#$%^&",
                                         "r.[",
                                         "\xff\xfe",
                                         "é.",
                                         std::string("a\0b", 3)};
  for (const auto& odd : odds) {
    for (std::size_t cursor = 0; cursor <= odd.size() + 1; ++cursor)
      CHECK_NOTHROW(complete(interp, odd, cursor));
  }
  CHECK(complete(interp, "(((", 3) == all);
}

}  // namespace
}  // namespace meshflow
