// `meshflow schedule`, through its command core (the executable needs the interpreter).
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "passes/schedules/ScheduleCli.h"

using meshflow::passes::runScheduleCli;

namespace {

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

CliResult runCli(std::vector<std::string> args) {
  std::ostringstream out;
  std::ostringstream err;
  int code = runScheduleCli(args, out, err);
  return {code, out.str(), err.str()};
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

}  // namespace

TEST_CASE("--json prints exactly ranks, makespan, bubble_fraction, peak_inflight",
          "[schedules][cli]") {
  CliResult result =
      runCli({"--pipeline", "1f1b", "--stages", "2", "--microbatches", "2", "--json"});
  CHECK(result.code == 0);
  CHECK(result.err.empty());
  CHECK(result.out ==
        "{\"ranks\":[[\"F0\",\"F1\",\"B0\",\"B1\"],[\"F0\",\"B0\",\"F1\",\"B1\"]],"
        "\"makespan\":9,\"bubble_fraction\":0.3333333333333333,\"peak_inflight\":[2,1]}\n");
}

TEST_CASE("--json writes chunks and fractional makespans", "[schedules][cli]") {
  CliResult result = runCli({"--pipeline=interleaved", "--stages=4", "--microbatches=8",
                             "--virtual=2", "--times=F=1,B=2", "--json"});
  REQUIRE(result.code == 0);
  auto report = nlohmann::json::parse(result.out);
  CHECK(report.at("makespan") == 28.5);
  CHECK(report.at("ranks")[0][0] == "F0.0");
  CHECK(report.at("ranks").size() == 4);
  CHECK(report.at("peak_inflight") == nlohmann::json({11, 9, 7, 5}));
}

TEST_CASE("text output: timeline, makespan and bubble fraction", "[schedules][cli]") {
  CliResult result = runCli({"--pipeline", "gpipe", "--stages", "4", "--microbatches", "8"});
  CHECK(result.code == 0);
  CHECK(result.out.starts_with("rank 0 | F0 F1 F2 F3 F4 F5 F6 F7 "));
  CHECK(result.out.find("makespan: 33\n") != std::string::npos);
  CHECK(result.out.find("bubble fraction: 3/11 (27.27%)\n") != std::string::npos);
  CHECK(result.out.find("peak in flight: 8 8 8 8\n") != std::string::npos);
}

TEST_CASE("--times accepts per-rank lists and zero-bubble W", "[schedules][cli]") {
  CliResult result = runCli({"--pipeline", "zb-h1", "--stages", "2", "--microbatches", "4",
                             "--times", "F=1:2,B=2:4,W=1:2", "--json"});
  REQUIRE(result.code == 0);
  CHECK(nlohmann::json::parse(result.out).at("ranks")[0][2] == "I0");
}

TEST_CASE("--trace and --svg write files", "[schedules][cli]") {
  const auto dir = std::filesystem::temp_directory_path();
  const auto trace = dir / "meshflow_schedule_cli_test.json";
  const auto svg = dir / "meshflow_schedule_cli_test.svg";
  CliResult result = runCli({"--pipeline", "zbv", "--stages", "2", "--microbatches", "4", "--trace",
                             trace.string(), "--svg", svg.string()});
  CHECK(result.code == 0);
  auto parsed = nlohmann::json::parse(readFile(trace));
  CHECK(parsed.at("traceEvents").size() > 10);
  CHECK(readFile(svg).starts_with("<svg"));
  std::filesystem::remove(trace);
  std::filesystem::remove(svg);
}

TEST_CASE("--help prints usage and succeeds", "[schedules][cli]") {
  CliResult result = runCli({"--help"});
  CHECK(result.code == 0);
  CHECK(result.out.starts_with("usage: meshflow schedule --pipeline KIND"));
}

TEST_CASE("a malformed command line exits 2 with one line", "[schedules][cli]") {
  CliResult unknown = runCli({"--pipeline", "1f1b", "--stages", "2", "--frobnicate"});
  CHECK(unknown.code == 2);
  CHECK(unknown.err ==
        "meshflow schedule: unknown option '--frobnicate' "
        "(see meshflow schedule --help)\n");
  CHECK(runCli({"--pipeline", "1f1b", "--stages"}).err ==
        "meshflow schedule: --stages needs a value (see meshflow schedule --help)\n");
  CliResult missing = runCli({"--pipeline", "1f1b", "--stages", "2"});
  CHECK(missing.code == 2);
  CHECK(missing.err ==
        "meshflow schedule: missing --microbatches (see meshflow schedule --help)\n");
  CHECK(runCli({"stray", "--pipeline", "1f1b"}).err ==
        "meshflow schedule: unexpected argument 'stray' (see meshflow schedule --help)\n");
}

TEST_CASE("bad values exit 1 with the rule on one line", "[schedules][cli]") {
  CliResult rule = runCli({"--pipeline", "interleaved", "--stages", "4", "--microbatches", "6"});
  CHECK(rule.code == 1);
  CHECK(rule.out.empty());
  CHECK(rule.err ==
        "meshflow schedule: interleaved needs microbatches to be a multiple of the "
        "group size 4, got 6\n");
  CHECK(runCli({"--pipeline", "1f1b", "--stages", "two", "--microbatches", "2"}).err ==
        "meshflow schedule: --stages expects an integer, got 'two'\n");
  CHECK(runCli({"--pipeline", "1f1b", "--stages", "2", "--microbatches", "2", "--times", "X=1"})
            .err == "meshflow schedule: --times names F, B and W, got 'X'\n");
  CHECK(runCli({"--pipeline", "1f1b", "--stages", "2", "--microbatches", "2", "--times", "F=1:2:3"})
            .err == "meshflow schedule: --times lists 3 times for F but there are 2 ranks\n");
  CHECK(runCli({"--pipeline", "1f1b", "--stages", "2", "--microbatches", "2", "--times", "F=x"})
            .err == "meshflow schedule: --times expects a number like 2, 1.5 or 3/2, got 'x'\n");
  CliResult unwritable = runCli({"--pipeline", "1f1b", "--stages", "2", "--microbatches", "2",
                                 "--svg", "/nonexistent-dir/x.svg"});
  CHECK(unwritable.code == 1);
  CHECK(unwritable.err == "meshflow schedule: cannot write '/nonexistent-dir/x.svg'\n");
}
