// Large-neighbourhood search (passes/ShardingNeighbourhood.h), through its
// internal interface: re-solving windows never raises the objective nor breaks
// the budget, and a window that covers a whole (connected) problem finds its
// optimum, as brute force does.
#include <catch2/catch.hpp>

#include <vector>

#include "passes/ShardingNeighbourhood.h"
#include "tests/unit/sharding/SolverTestSupport.h"

using meshflow::passes::ShardingProblem;
using namespace meshflow::passes::sharding;
namespace families = meshflow::families;
using meshflow::test::bruteForce;
using meshflow::test::memoryOf;

namespace {

// A connected problem: a chain through every node plus random extra edges,
// `strategies` each, under a budget 30% of the way from least to most memory.
ShardingProblem connected(int nodes, int strategies, unsigned seed) {
  families::Draw d(seed);
  ShardingProblem p;
  for (int i = 0; i < nodes; ++i) {
    d.node(p, "n" + std::to_string(i), strategies);
    if (i > 0) d.edge(p, d.below(i), i);
    if (i > 1 && d.below(2) == 0) d.edge(p, d.below(i - 1), i);
  }
  return families::withBudget(p, 0.3);
}

MemoryBudget budgetOf(const ShardingProblem& p) {
  MemoryBudget m;
  for (const auto& n : p.nodes) m.memory.push_back(n.memory);
  m.budget = *p.memoryBudget;
  return m;
}

// The same with every forbidden pair allowed at a high cost, so that every
// choice is feasible as far as the edges go.
ShardingProblem allowed(ShardingProblem p) {
  for (auto& e : p.edges)
    for (auto& row : e.costs)
      for (double& c : row) c = std::isfinite(c) ? c : 5.0;
  return p;
}

// Each node on its least-memory strategy: it fits any budget that can be met,
// though edges may forbid it.
std::vector<int> leanest(const ShardingProblem& p) {
  std::vector<int> c;
  for (const auto& n : p.nodes) {
    c.push_back(static_cast<int>(std::min_element(n.memory.begin(), n.memory.end()) -
                                 n.memory.begin()));
  }
  return c;
}

}  // namespace

TEST_CASE("windows: one window over a whole connected problem finds its optimum",
          "[sharding][neighbourhood]") {
  int tried = 0;
  for (unsigned seed = 1; tried < 20; ++seed) {
    ShardingProblem p = connected(8, 3, seed);
    CostGraph g = buildCostGraph(p);
    MemoryBudget m = budgetOf(p);
    std::vector<int> c = leanest(p);
    if (!std::isfinite(g.objective(c))) continue;
    ++tried;
    auto brute = bruteForce(p);
    REQUIRE(brute);
    StepBudget steps(100000000);
    improveByWindows(g, &m, c, steps);
    INFO("seed " << seed);
    CHECK(memoryOf(p, c) <= *p.memoryBudget);
    CHECK(g.objective(c) == Approx(brute->optimum).epsilon(1e-9));
  }
}

TEST_CASE("windows: never raise the objective nor break the budget", "[sharding][neighbourhood]") {
  for (unsigned seed : {3u, 4u, 5u}) {
    ShardingProblem p = allowed(families::withBudget(families::randomDag(100, 2, 8, seed), 0.3));
    CostGraph g = buildCostGraph(p);
    MemoryBudget m = budgetOf(p);
    std::vector<int> c = leanest(p);
    double before = g.objective(c);
    REQUIRE(std::isfinite(before));
    StepBudget steps(100000000);
    improveByWindows(g, &m, c, steps);
    INFO("seed " << seed);
    CHECK(m.fits(c));
    CHECK(g.objective(c) < before);
    // A fixpoint: another pass finds nothing more.
    std::vector<int> again = c;
    StepBudget more(100000000);
    improveByWindows(g, &m, again, more);
    CHECK(again == c);
  }
}

TEST_CASE("windows: stop at the deadline", "[sharding][neighbourhood]") {
  ShardingProblem p = allowed(families::withBudget(families::randomDag(200, 2, 16, 7), 0.3));
  CostGraph g = buildCostGraph(p);
  MemoryBudget m = budgetOf(p);
  std::vector<int> c = leanest(p);
  REQUIRE(std::isfinite(g.objective(c)));
  std::vector<int> start = c;
  StepBudget past(100000000, Clock::now() - std::chrono::milliseconds(1));
  improveByWindows(g, &m, c, past);
  CHECK(c == start);
  CHECK(past.used() == 0);
  // With time, the same start improves (so the check above could fail).
  StepBudget steps(100000000);
  improveByWindows(g, &m, c, steps);
  CHECK(g.objective(c) < g.objective(start));
}
