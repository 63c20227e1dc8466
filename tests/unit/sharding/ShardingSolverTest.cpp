#include <catch2/catch.hpp>
#include <cmath>
#include <optional>
#include <string>

#include "passes/ShardingSolver.h"
#include "tests/unit/sharding/SolverTestSupport.h"

using meshflow::passes::ShardingEdge;
using meshflow::passes::ShardingError;
using meshflow::passes::ShardingNode;
using meshflow::passes::ShardingProblem;
using meshflow::passes::ShardingSolution;
using meshflow::passes::SolveOptions;
using meshflow::passes::solveSharding;
using namespace meshflow::test;

namespace {

// Solves and checks against brute force: the optimum, the budget, and the
// canonical answer (the lexicographically smallest optimal choice). Returns
// whether the problem was feasible.
bool checkAgainstBruteForce(const ShardingProblem& p, unsigned seed, const SolveOptions& options) {
  std::optional<BruteForce> expected = bruteForce(p);
  INFO("seed " << seed);
  if (!expected) {
    CHECK_THROWS_AS(solveSharding(p, options), ShardingError);
    return false;
  }
  ShardingSolution s = solveSharding(p, options);
  CHECK(s.optimal);
  CHECK(s.objective == Approx(expected->optimum).margin(1e-9));
  CHECK(s.lowerBound == s.objective);
  CHECK(evaluate(p, s.choice) == Approx(s.objective).margin(1e-9));
  if (p.memoryBudget) CHECK(memoryOf(p, s.choice) <= *p.memoryBudget);  // Exactly, no slack.
  CHECK(s.choice == expected->smallest);
  for (size_t i = 0; i < s.choice.size(); ++i) {
    CHECK(s.alternatives[i][s.choice[i]] == Approx(s.objective));
  }
  return true;
}

bool checkAgainstBruteForce(unsigned seed, const SolveOptions& options) {
  return checkAgainstBruteForce(randomProblem(seed), seed, options);
}

ShardingNode node(const char* name, std::vector<double> costs, std::vector<double> memory = {}) {
  return {name, std::move(costs), std::move(memory)};
}

}  // namespace

TEST_CASE("solver: random problems equal brute force (shrink + branch and bound)",
          "[sharding][solver]") {
  int feasible = 0;
  for (unsigned seed = 0; seed < 600; ++seed) feasible += checkAgainstBruteForce(seed, {});
  CHECK(feasible > 300);  // The generator must not make most problems infeasible.
}

TEST_CASE("solver: random problems equal brute force (shrink + CBC)", "[sharding][solver]") {
  SolveOptions cbcOnly;
  cbcOnly.searchLimit = 0;
  for (unsigned seed = 1000; seed < 1300; ++seed) checkAgainstBruteForce(seed, cbcOnly);
}

TEST_CASE("solver: random problems under a memory budget equal brute force",
          "[sharding][solver][budget]") {
  int feasible = 0, binding = 0;
  for (unsigned seed = 3000; seed < 3600; ++seed) {
    ShardingProblem p = randomProblem(seed, Budget::kAlways);
    feasible += checkAgainstBruteForce(p, seed, {});
    // Count the problems whose budget changes the answer.
    ShardingProblem free = p;
    free.memoryBudget.reset();
    std::optional<BruteForce> a = bruteForce(p), b = bruteForce(free);
    binding += a && b && a->optimum > b->optimum + 1e-9;
  }
  CHECK(feasible > 300);
  CHECK(binding > 150);  // The budget must bind often enough to test the relaxation.
}

TEST_CASE("solver: random problems under a memory budget equal brute force (CBC)",
          "[sharding][solver][budget]") {
  SolveOptions cbcOnly;
  cbcOnly.searchLimit = 0;  // The Lagrangian search gives up at once and hands over to CBC.
  for (unsigned seed = 4000; seed < 4200; ++seed) {
    checkAgainstBruteForce(randomProblem(seed, Budget::kAlways), seed, cbcOnly);
  }
}

TEST_CASE("solver: long chains and trees shrink away exactly", "[sharding][solver]") {
  ShardingProblem p;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int i = 0; i < 300; ++i) {
    p.nodes.push_back(node("op", {u(rng), u(rng), u(rng), u(rng)}));
    if (i == 0) continue;
    // Nodes hang off a chain; every third one branches to make a tree.
    ShardingEdge e{i % 3 == 0 ? i / 2 : i - 1, i, {}};
    for (int r = 0; r < 4; ++r) e.costs.push_back({u(rng), u(rng), u(rng), u(rng)});
    p.edges.push_back(e);
  }
  ShardingSolution s = solveSharding(p, {});
  CHECK(s.optimal);
  CHECK(s.residualNodes == 0);
  // Optimal: no single node can improve.
  for (size_t i = 0; i < s.choice.size(); ++i) {
    for (double alt : s.alternatives[i]) CHECK(alt >= s.objective - 1e-9);
  }
}

TEST_CASE("solver: ties go to the lowest strategy", "[sharding][solver]") {
  ShardingProblem p;
  p.nodes = {node("a", {1, 1, 1}), node("b", {2, 2})};
  p.edges = {{0, 1, {{5, 5}, {0, 0}, {0, 0}}}};
  ShardingSolution s = solveSharding(p, {});
  CHECK(s.choice == std::vector<int>{1, 0});
  CHECK(s.objective == 3.0);
}

TEST_CASE("solver: memory budget forces a costlier strategy", "[sharding][solver]") {
  ShardingProblem p;
  p.nodes = {node("w1", {0, 5}, {10, 2}), node("w2", {0, 1}, {10, 5}), node("x", {0})};
  p.edges = {{0, 2, {{0}, {0}}}, {1, 2, {{0}, {0}}}};
  p.memoryBudget = 12;
  ShardingSolution s = solveSharding(p, {});
  CHECK(s.choice == std::vector<int>{1, 0, 0});
  CHECK(s.objective == 5.0);
  CHECK(std::isinf(s.alternatives[0][0]));  // Over the budget.
}

TEST_CASE("solver: infeasible problems name the cause", "[sharding][solver]") {
  ShardingProblem p;
  p.nodes = {node("a", {1, 2}), node("b", {1, 2})};
  p.edges = {{0, 1, {{kInf, kInf}, {kInf, kInf}}}};
  CHECK_THROWS_WITH(solveSharding(p, {}), Catch::Contains("edge 0 (0 -> 1) allows no pair"));

  p.edges = {{0, 1, {{kInf, 0}, {kInf, kInf}}}, {1, 0, {{0, kInf}, {kInf, kInf}}}};
  CHECK_THROWS_WITH(solveSharding(p, {}), Catch::Contains("infeasible"));

  p.edges = {};
  p.nodes[0].memory = {4, 3};
  p.nodes[1].memory = {4, 3};
  p.memoryBudget = 5;
  CHECK_THROWS_WITH(solveSharding(p, {}), Catch::Contains("memory budget 5 is below 6"));
}

TEST_CASE("solver: malformed problems name the node or edge", "[sharding][solver]") {
  ShardingProblem p;
  p.nodes = {node("a", {1, 2}), node("b", {})};
  CHECK_THROWS_WITH(solveSharding(p, {}), "node 1 'b' has no strategies");
  p.nodes[1].costs = {-1};
  CHECK_THROWS_WITH(solveSharding(p, {}), Catch::Contains("node 1 'b': cost of strategy 0"));
  p.nodes[1].costs = {1};
  p.edges = {{0, 2, {{0}, {0}}}};
  CHECK_THROWS_WITH(solveSharding(p, {}), Catch::Contains("edge 0 (0 -> 2) names a node"));
  p.edges = {{0, 1, {{0}}}};
  CHECK_THROWS_WITH(solveSharding(p, {}), Catch::Contains("cost matrix has 1 rows, expected 2"));
  p.edges = {{0, 1, {{0}, {0, 1}}}};
  CHECK_THROWS_WITH(solveSharding(p, {}), Catch::Contains("row 1 has 2 entries, expected 1"));
}

TEST_CASE("solver: an empty problem has objective zero", "[sharding][solver]") {
  ShardingSolution s = solveSharding(ShardingProblem{}, {});
  CHECK(s.objective == 0.0);
  CHECK(s.choice.empty());
  CHECK(s.optimal);
}
