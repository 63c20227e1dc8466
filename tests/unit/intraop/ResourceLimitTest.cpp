// CBC's node limit (SolveOptions::resourceLimit) makes an answer reached when
// the limit runs out reproducible.
#include <catch2/catch.hpp>

#include <random>

#include "passes/ShardingSolver.h"

using namespace meshflow::passes;

TEST_CASE("a node-limited CBC answer is the same on every run") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> cost(0, 10);
  ShardingProblem p;
  for (int i = 0; i < 30; ++i) {
    ShardingNode n{"n" + std::to_string(i), {}, {}};
    for (int k = 0; k < 6; ++k) n.costs.push_back(cost(rng));
    p.nodes.push_back(n);
  }
  for (int i = 0; i < 30; ++i) {
    for (int j : {(i + 1) % 30, (i + 7) % 30, (i + 13) % 30}) {
      ShardingEdge e{i, j, std::vector<std::vector<double>>(6, std::vector<double>(6))};
      for (auto& row : e.costs) {
        for (double& c : row) c = cost(rng);
      }
      p.edges.push_back(e);
    }
  }
  SolveOptions o;
  o.searchLimit = 0;  // straight to CBC
  o.timeBudgetSeconds = 60;
  o.resourceLimit = 2;
  ShardingSolution a = solveSharding(p, o);
  CHECK_FALSE(a.optimal);  // the limit, not the proof, ended the search
  CHECK(a.lowerBound > 0);  // CBC's bound after two nodes, below the answer
  CHECK(a.gap() > 0);
  CHECK(a.gap() < 1);
  ShardingSolution b = solveSharding(p, o);
  CHECK(a.choice == b.choice);
  CHECK(a.objective == b.objective);
  CHECK(a.optimal == b.optimal);
}
