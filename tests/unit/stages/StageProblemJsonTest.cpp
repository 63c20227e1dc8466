// The JSON form of stage problems: reading, the paths in its errors, printing.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "passes/StageProblemJson.h"

namespace meshflow::passes {
namespace {

using nlohmann::json;

// Two layers on a 1×2 cluster with shapes (1,1) and (1,2) and one config.
json twoLayerJson() {
  return json::parse(R"({
    "layers": 2, "microbatches": 4, "cluster": [1, 2], "submeshes": [[1, 1], [1, 2]],
    "cost": [[[[1], [null]], [[null], [1.5]]],
             [[[null], [null]], [[1], [null]]]]
  })");
}

std::string errorOf(const json& input) {
  try {
    parseStageProblem(input);
  } catch (const StageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_CASE("a JSON problem is read and solved", "[stages][json]") {
  StageProblem p = parseStageProblem(twoLayerJson());
  CHECK(p.layers == 2);
  CHECK(p.microbatches == 4);
  CHECK(p.nodes == 1);
  CHECK(p.devicesPerNode == 2);
  CHECK(p.configs == 1);
  CHECK(p.submeshes == std::vector<SubmeshShape>{{1, 1}, {1, 2}});
  CHECK(p.at(0, 1, 1, 0) == 1.5);
  CHECK(p.at(0, 1, 0, 0) == StageProblem::kInfeasible);
  CHECK(p.maxSuccStages.empty());
  CHECK(stageSolutionToJson(solveStages(p)).dump() ==
        R"({"cost":5.0,"optimal":true,"stages":[{"config":0,"layers":[0,1],"submesh":0},)"
        R"({"config":0,"layers":[1,2],"submesh":0}]})");
}

TEST_CASE("max_n_succ_stages is read, null meaning unlimited", "[stages][json]") {
  json input = twoLayerJson();
  input["max_n_succ_stages"] = json::parse(R"([[[[0], [null]], [[null], [null]]],
                                               [[[null], [null]], [[null], [null]]]])");
  StageProblem p = parseStageProblem(input);
  CHECK(p.maxSuccStages[p.index(0, 0, 0, 0)] == 0);
  CHECK(p.maxSuccStages[p.index(0, 1, 1, 0)] == StageProblem::kUnlimited);
  CHECK(solveStages(p).cost == 6);
}

TEST_CASE("printing a problem reads back the same problem", "[stages][json]") {
  json input = twoLayerJson();
  input["max_n_succ_stages"] = json::parse(R"([[[[0], [3]], [[null], [null]]],
                                               [[[null], [null]], [[1], [null]]]])");
  StageProblem p = parseStageProblem(input);
  json printed = stageProblemToJson(p);
  CHECK(printed == input);
  StageProblem again = parseStageProblemText(printed.dump());
  CHECK(again.cost == p.cost);
  CHECK(again.maxSuccStages == p.maxSuccStages);
}

TEST_CASE("JSON errors name the offending path", "[stages][json][errors]") {
  json input = twoLayerJson();
  SECTION("a missing key") {
    input.erase("layers");
    CHECK(errorOf(input) == "layers: missing");
  }
  SECTION("an unknown key") {
    input["max_n_succ_stage"] = 1;
    CHECK(errorOf(input) ==
          "max_n_succ_stage: unknown key (expected layers, microbatches, cluster, submeshes, "
          "cost, max_n_succ_stages)");
  }
  SECTION("a non-integer count") {
    input["microbatches"] = 2.5;
    CHECK(errorOf(input) == "microbatches: expected a positive integer, got 2.5");
  }
  SECTION("a cluster of the wrong arity") {
    input["cluster"] = {1, 2, 3};
    CHECK(errorOf(input) == "cluster: expected 2 integers [N, M], got 3");
  }
  SECTION("a bad submesh") {
    input["submeshes"][1] = {1, 0};
    CHECK(errorOf(input) == "submeshes[1][1]: expected a positive integer, got 0");
  }
  SECTION("a submesh bigger than the cluster") {
    input["submeshes"][1] = {1, 4};
    CHECK(errorOf(input) == "submeshes[1]: (1, 4) does not fit in the 1x2 cluster");
  }
  SECTION("too few j entries") {
    input["cost"][1].erase(1);
    CHECK(errorOf(input) == "cost[1]: expected 2 layer entries (j), got 1");
  }
  SECTION("too few submesh entries") {
    input["cost"][1][0] = json::parse("[[null]]");
    CHECK(errorOf(input) == "cost[1][0]: expected 2 submesh entries, got 1");
  }
  SECTION("ragged configs") {
    input["cost"][0][1][1] = {1.5, 2};
    CHECK(errorOf(input) == "cost[0][1][1]: expected 1 config entries, got 2");
  }
  SECTION("a latency that is not a number") {
    input["cost"][0][0][0][0] = "x";
    CHECK(errorOf(input) == R"(cost[0][0][0][0]: expected a latency >= 0 or null, got "x")");
  }
  SECTION("a negative latency") {
    input["cost"][1][1][0][0] = -2;
    CHECK(errorOf(input) == "cost[1][1][0][0]: expected a latency >= 0 or null, got -2");
  }
  SECTION("a limit of the wrong shape") {
    input["max_n_succ_stages"] = json::parse("[[], []]");
    CHECK(errorOf(input) == "max_n_succ_stages[0]: expected 2 layer entries (j), got 0");
  }
  SECTION("a fractional limit") {
    input["max_n_succ_stages"] = json::parse(R"([[[[1.5], [null]], [[null], [null]]],
                                                 [[[null], [null]], [[null], [null]]]])");
    CHECK(errorOf(input) ==
          "max_n_succ_stages[0][0][0][0]: expected an integer or null (unlimited), got 1.5");
  }
  SECTION("not an object") {
    CHECK(errorOf(json::array()) == "(root): expected an object, got []");
  }
}

TEST_CASE("malformed JSON text is a StageError", "[stages][json][errors]") {
  REQUIRE_THROWS_AS(parseStageProblemText(std::string_view("{\"layers\": ")), StageError);
  REQUIRE_THROWS_WITH(parseStageProblemText(std::string_view("{")),
                      Catch::StartsWith("invalid JSON: "));
}

}  // namespace
}  // namespace meshflow::passes
