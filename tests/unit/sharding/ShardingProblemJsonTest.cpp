#include <catch2/catch.hpp>
#include <cmath>

#include "passes/ShardingProblemJson.h"

using meshflow::passes::parseShardingProblem;
using meshflow::passes::printShardingProblem;
using meshflow::passes::printShardingSolution;
using meshflow::passes::ShardingError;
using meshflow::passes::ShardingProblem;
using meshflow::passes::ShardingSolution;
using meshflow::passes::solveSharding;

namespace {

const char* kProblem = R"({
  "nodes": [
    {"name": "fc1", "costs": [0, 4], "memory": [8, 2]},
    {"name": "fc2", "costs": [1, 0.5]}
  ],
  "edges": [{"from": 0, "to": 1, "costs": [[0, null], [3, 1]]}],
  "memory_budget": 10
})";

std::string errorOf(const std::string& text) {
  try {
    parseShardingProblem(text);
  } catch (const ShardingError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("json: parse, print and parse back", "[sharding][json]") {
  ShardingProblem p = parseShardingProblem(kProblem);
  REQUIRE(p.nodes.size() == 2);
  CHECK(p.nodes[0].name == "fc1");
  CHECK(p.nodes[0].memory == std::vector<double>{8, 2});
  CHECK(p.nodes[1].memory.empty());
  CHECK(std::isinf(p.edges[0].costs[0][1]));
  CHECK(p.memoryBudget == 10.0);
  std::string printed = printShardingProblem(p);
  CHECK(printed == R"({"nodes":[{"name":"fc1","costs":[0.0,4.0],"memory":[8.0,2.0]},)"
                   R"({"name":"fc2","costs":[1.0,0.5]}],"edges":[{"from":0,"to":1,)"
                   R"("costs":[[0.0,null],[3.0,1.0]]}],"memory_budget":10.0})");
  CHECK(printShardingProblem(parseShardingProblem(printed)) == printed);
}

TEST_CASE("json: solution output", "[sharding][json]") {
  ShardingSolution s = solveSharding(parseShardingProblem(kProblem), {});
  CHECK(printShardingSolution(s) ==
        R"({"objective":1.0,"choice":[0,0],"optimal":true,"bound":1.0,"gap":0.0})");
  // An answer the time budget cut short: its proven bound and the relative gap.
  s.objective = 10.0;
  s.optimal = false;
  s.lowerBound = 9.5;
  CHECK(printShardingSolution(s) ==
        R"({"objective":10.0,"choice":[0,0],"optimal":false,"bound":9.5,"gap":0.05})");
}

TEST_CASE("json: malformed input names the place", "[sharding][json]") {
  CHECK(errorOf("{") ==
        "malformed JSON: parse error at line 1, column 2: syntax error while parsing object key - "
        "unexpected end of input; expected string literal");
  CHECK(errorOf("[]") == "problem: expected an object");
  CHECK(errorOf("{}") == "problem: missing \"nodes\"");
  CHECK(errorOf(R"({"nodes": [], "memory_bugdet": 3})") ==
        "problem: unknown key \"memory_bugdet\"");
  CHECK(errorOf(R"({"nodes": [{"costs": [1]}]})") == "nodes[0]: missing \"name\"");
  CHECK(errorOf(R"({"nodes": [{"name": "a", "costs": []}]})") ==
        "nodes[0].costs: must not be empty");
  CHECK(errorOf(R"({"nodes": [{"name": "a", "costs": [1, -2]}]})") ==
        "nodes[0].costs[1]: must be finite and non-negative");
  CHECK(errorOf(R"({"nodes": [{"name": "a", "costs": [1, "x"]}]})") ==
        "nodes[0].costs[1]: expected a number");
  CHECK(errorOf(R"({"nodes": [{"name": "a", "costs": [1, null]}]})") ==
        "nodes[0].costs[1]: expected a number");
  CHECK(errorOf(R"({"nodes": [{"name": "a", "costs": [1], "memory": [1, 2]}]})") ==
        "nodes[0].memory: has 2 entries but the node has 1 strategies");
  const char* twoNodes =
      R"({"nodes": [{"name": "a", "costs": [1, 2]}, {"name": "b", "costs": [1]}], )";
  CHECK(errorOf(std::string(twoNodes) + R"("edges": [{"from": 0, "to": 2, "costs": []}]})") ==
        "edges[0].to: node index 2 is outside 0..1");
  CHECK(errorOf(std::string(twoNodes) + R"("edges": [{"from": 0, "to": 1.5, "costs": []}]})") ==
        "edges[0].to: expected a node index");
  CHECK(errorOf(std::string(twoNodes) + R"("edges": [{"from": 0, "to": 1, "costs": [[1]]}]})") ==
        "edges[0] (0 -> 1).costs: has 1 rows but node 0 'a' has 2 strategies");
  CHECK(errorOf(std::string(twoNodes) +
                R"("edges": [{"from": 0, "to": 1, "costs": [[1], [1, 2]]}]})") ==
        "edges[0] (0 -> 1).costs[1]: has 2 entries, expected 1");
  CHECK(errorOf(std::string(twoNodes) +
                R"("edges": [{"from": 0, "to": 1, "costs": [[1], [-1]]}]})") ==
        "edges[0] (0 -> 1).costs[1][0]: must be finite and non-negative");
  CHECK(errorOf(std::string(twoNodes) + R"("memory_budget": -1})") ==
        "memory_budget: must be finite and non-negative");
}
