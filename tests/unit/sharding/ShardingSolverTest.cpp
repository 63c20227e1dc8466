#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <optional>
#include <random>
#include <string>

#include "passes/ShardingSolver.h"

using meshflow::passes::ShardingEdge;
using meshflow::passes::ShardingError;
using meshflow::passes::ShardingNode;
using meshflow::passes::ShardingProblem;
using meshflow::passes::ShardingSolution;
using meshflow::passes::SolveOptions;
using meshflow::passes::solveSharding;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The objective of a full assignment, computed independently of the solver.
double evaluate(const ShardingProblem& p, const std::vector<int>& c) {
  double total = 0.0, memory = 0.0;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    total += p.nodes[i].costs[c[i]];
    if (!p.nodes[i].memory.empty()) memory += p.nodes[i].memory[c[i]];
  }
  for (const ShardingEdge& e : p.edges) total += e.costs[c[e.from]][c[e.to]];
  if (p.memoryBudget && memory > *p.memoryBudget + 1e-9) return kInf;
  return total;
}

// Exhaustive search: the optimum, or nullopt when no assignment is feasible.
std::optional<double> bruteForce(const ShardingProblem& p) {
  std::vector<int> c(p.nodes.size(), 0);
  double best = kInf;
  while (true) {
    best = std::min(best, evaluate(p, c));
    size_t i = 0;
    while (i < c.size() && ++c[i] == static_cast<int>(p.nodes[i].costs.size())) c[i++] = 0;
    if (i == c.size()) break;
  }
  if (std::isinf(best)) return std::nullopt;
  return best;
}

// Random problems of at most 8 nodes and 4 strategies, with random edges (some
// parallel, some self-loops), some infinite entries and sometimes a memory budget.
ShardingProblem randomProblem(unsigned seed) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto real = [&] { return std::uniform_real_distribution<double>(0.0, 10.0)(rng); };
  bool integral = uniform(0, 1) == 0;  // Integer costs make ties, which test tie-breaking.
  auto value = [&] { return integral ? double(uniform(0, 5)) : real(); };
  ShardingProblem p;
  int n = uniform(1, 8);
  bool withMemory = uniform(0, 2) == 0;
  double memoryMax = 0.0;
  for (int i = 0; i < n; ++i) {
    ShardingNode node{"n" + std::to_string(i), {}, {}};
    int s = uniform(1, 4);
    double most = 0.0;
    for (int k = 0; k < s; ++k) {
      node.costs.push_back(value());
      if (withMemory) node.memory.push_back(double(uniform(0, 6)));
      if (withMemory) most = std::max(most, node.memory.back());
    }
    memoryMax += most;
    p.nodes.push_back(node);
  }
  int edges = uniform(0, 2 * n);
  int infPercent = uniform(0, 25);
  for (int e = 0; e < edges; ++e) {
    ShardingEdge edge{uniform(0, n - 1), uniform(0, n - 1), {}};
    for (size_t r = 0; r < p.nodes[edge.from].costs.size(); ++r) {
      std::vector<double> row;
      for (size_t c = 0; c < p.nodes[edge.to].costs.size(); ++c) {
        row.push_back(uniform(0, 99) < infPercent ? kInf : value());
      }
      edge.costs.push_back(row);
    }
    p.edges.push_back(edge);
  }
  if (withMemory) p.memoryBudget = std::floor(memoryMax * uniform(30, 100) / 100.0);
  return p;
}

// Solves and checks against brute force; returns whether the problem was feasible.
bool checkAgainstBruteForce(unsigned seed, const SolveOptions& options) {
  ShardingProblem p = randomProblem(seed);
  std::optional<double> expected = bruteForce(p);
  INFO("seed " << seed);
  if (!expected) {
    CHECK_THROWS_AS(solveSharding(p, options), ShardingError);
    return false;
  }
  ShardingSolution s = solveSharding(p, options);
  CHECK(s.optimal);
  CHECK(s.objective == Approx(*expected).margin(1e-9));
  CHECK(evaluate(p, s.choice) == Approx(s.objective).margin(1e-9));
  // Canonical: no node can lower its strategy index without raising the objective.
  for (size_t i = 0; i < s.choice.size(); ++i) {
    for (int k = 0; k < s.choice[i]; ++k) {
      CHECK(s.alternatives[i][k] > s.objective + 1e-9);
    }
    CHECK(s.alternatives[i][s.choice[i]] == Approx(s.objective));
  }
  return true;
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

TEST_CASE("solver: random problems equal brute force (shrink + Z3)", "[sharding][solver]") {
  SolveOptions z3Only;
  z3Only.searchLimit = 0;
  for (unsigned seed = 1000; seed < 1300; ++seed) checkAgainstBruteForce(seed, z3Only);
}

TEST_CASE("solver: the same problem gives the same answer", "[sharding][solver]") {
  SolveOptions z3Only;
  z3Only.searchLimit = 0;
  for (unsigned seed = 2000; seed < 2040; ++seed) {
    ShardingProblem p = randomProblem(seed);
    if (!bruteForce(p)) continue;
    ShardingSolution a = solveSharding(p, z3Only);
    ShardingSolution b = solveSharding(p, z3Only);
    ShardingSolution c = solveSharding(p, {});
    CHECK(a.choice == b.choice);
    CHECK(a.objective == b.objective);
    CHECK(a.objective == Approx(c.objective));
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
