// The stage DP against exhaustive search on random small tables.
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <string>

#include "passes/StageSolver.h"
#include "tests/unit/stages/BruteForce.h"

namespace meshflow::passes {
namespace {

using testing::bruteForceCost;
using testing::limitsHold;
using testing::planCost;
using testing::tiles;

struct ClusterShape {
  int nodes, devicesPerNode;
};

// Alpa's shapes for the cluster, (1, m) for each divisor m of M and (n, M) for
// n ≥ 2, then a random non-empty subset in random order, so the solver cannot
// rely on the list being sorted or complete.
std::vector<SubmeshShape> randomSubmeshes(ClusterShape cluster, std::mt19937& rng) {
  std::vector<SubmeshShape> all;
  for (int m = 1; m <= cluster.devicesPerNode; ++m)
    if (cluster.devicesPerNode % m == 0) all.push_back({1, m});
  for (int n = 2; n <= cluster.nodes; ++n) all.push_back({n, cluster.devicesPerNode});
  std::shuffle(all.begin(), all.end(), rng);
  std::vector<SubmeshShape> picked;
  for (SubmeshShape s : all)
    if (rng() % 4 != 0) picked.push_back(s);
  if (picked.empty()) picked.push_back(all.front());
  return picked;
}

// Integer latencies keep every sum exact, so the DP and the brute force must
// agree to the last bit.
StageProblem randomProblem(std::uint32_t seed) {
  std::mt19937 rng(seed);
  static constexpr ClusterShape kClusters[] = {{1, 1}, {1, 2}, {1, 4}, {2, 2},
                                               {2, 4}, {1, 3}, {3, 2}, {4, 1}};
  ClusterShape cluster = kClusters[rng() % std::size(kClusters)];
  int layers = 1 + static_cast<int>(rng() % 6);
  int configs = 1 + static_cast<int>(rng() % 3);
  int microbatches = 1 + static_cast<int>(rng() % 8);
  StageProblem p = StageProblem::make(layers, microbatches, cluster.nodes, cluster.devicesPerNode,
                                      randomSubmeshes(cluster, rng), configs);
  int nullPercent = static_cast<int>(rng() % 40);
  for (double& c : p.cost)
    c = static_cast<int>(rng() % 100) < nullPercent ? StageProblem::kInfeasible
                                                    : static_cast<double>(1 + rng() % 30);
  if (rng() % 3 != 0) {
    p.maxSuccStages.resize(p.cost.size());
    for (int& k : p.maxSuccStages)
      k = rng() % 4 == 0 ? StageProblem::kUnlimited : static_cast<int>(rng() % (layers + 1)) - 1;
  }
  return p;
}

// The solution is a real plan: consecutive stages covering every layer, table
// latencies, a tiling of the cluster, limits respected, and the cost it claims.
void checkPlan(const StageProblem& p, const StageSolution& solution) {
  int next = 0;
  for (const Stage& s : solution.stages) {
    REQUIRE(s.firstLayer == next);
    REQUIRE(s.endLayer > s.firstLayer);
    REQUIRE(s.latency == p.at(s.firstLayer, s.endLayer - 1, s.submesh, s.config));
    next = s.endLayer;
  }
  REQUIRE(next == p.layers);
  int devices = 0;
  for (const Stage& s : solution.stages) devices += p.submeshes[s.submesh].devices();
  REQUIRE(devices == p.nodes * p.devicesPerNode);
  REQUIRE(tiles(p, solution.stages));
  REQUIRE(limitsHold(p, solution.stages));
  REQUIRE(planCost(p, solution.stages) == solution.cost);
}

TEST_CASE("the stage DP matches brute force on random tables", "[stages][random]") {
  int feasible = 0, infeasible = 0, withLimits = 0;
  for (std::uint32_t seed = 1; seed <= 600; ++seed) {
    StageProblem p = randomProblem(seed);
    INFO("seed " << seed << ": L=" << p.layers << " cluster " << p.nodes << "x" << p.devicesPerNode
                 << " S=" << p.submeshes.size() << " G=" << p.configs << " B=" << p.microbatches
                 << (p.maxSuccStages.empty() ? "" : " with limits"));
    double expected = bruteForceCost(p);
    if (expected == StageProblem::kInfeasible) {
      REQUIRE_THROWS_WITH(solveStages(p), Catch::Contains("no feasible plan"));
      ++infeasible;
      continue;
    }
    StageSolution solution = solveStages(p);
    REQUIRE(solution.cost == expected);
    checkPlan(p, solution);
    ++feasible;
    withLimits += p.maxSuccStages.empty() ? 0 : 1;
  }
  // The generator must exercise both outcomes and the limits, or the test proves little.
  CHECK(feasible >= 200);
  CHECK(infeasible >= 50);
  CHECK(withLimits >= 100);
}

TEST_CASE("the stage DP is deterministic and ignores submesh order", "[stages][random]") {
  for (std::uint32_t seed = 1000; seed < 1100; ++seed) {
    StageProblem p = randomProblem(seed);
    if (bruteForceCost(p) == StageProblem::kInfeasible) continue;
    StageSolution first = solveStages(p);
    StageSolution again = solveStages(p);
    REQUIRE(first.stages == again.stages);
    REQUIRE(first.cost == again.cost);

    // Reverse the submesh list (and the table with it): the same optimum.
    StageProblem reversed = p;
    int S = static_cast<int>(p.submeshes.size());
    std::reverse(reversed.submeshes.begin(), reversed.submeshes.end());
    for (int i = 0; i < p.layers; ++i)
      for (int j = 0; j < p.layers; ++j)
        for (int s = 0; s < S; ++s)
          for (int g = 0; g < p.configs; ++g) {
            reversed.at(i, j, S - 1 - s, g) = p.at(i, j, s, g);
            if (!p.maxSuccStages.empty())
              reversed.maxSuccStages[p.index(i, j, S - 1 - s, g)] =
                  p.maxSuccStages[p.index(i, j, s, g)];
          }
    REQUIRE(solveStages(reversed).cost == first.cost);
  }
}

TEST_CASE("the stage DP with a t_max gap stays within it of the optimum", "[stages][random]") {
  // Integer latencies 1..30 are at most 1/30 apart relatively, so a 10% gap
  // skips caps: the result may be worse than the optimum, never by more.
  int feasible = 0;
  for (std::uint32_t seed = 1; seed <= 600; ++seed) {
    StageProblem p = randomProblem(seed);
    double expected = bruteForceCost(p);
    if (expected == StageProblem::kInfeasible) continue;
    INFO("seed " << seed);
    p.tmaxGap = 0.1;
    StageSolution solution = solveStages(p);
    checkPlan(p, solution);
    REQUIRE(solution.cost >= expected);
    REQUIRE(solution.cost <= expected * 1.1);
    ++feasible;
  }
  CHECK(feasible >= 200);
}

TEST_CASE("a t_max gap saves DP runs where latencies are many and close", "[stages][random]") {
  // What the planner meets on large clusters: thousands of distinct latencies.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> perLayer(1.0, 1.2);
  StageProblem p = StageProblem::make(24, 16, 4, 2, {{1, 1}, {1, 2}, {2, 2}, {4, 2}}, 2);
  for (int i = 0; i < p.layers; ++i)
    for (int j = i; j < p.layers; ++j)
      for (int s = 0; s < int(p.submeshes.size()); ++s)
        for (int g = 0; g < p.configs; ++g) {
          double work = 0;
          for (int l = i; l <= j; ++l) work += perLayer(rng);
          p.at(i, j, s, g) = work / p.submeshes[s].devices();
        }
  StageSolution exact = solveStages(p);
  p.tmaxGap = 0.02;
  StageSolution gapped = solveStages(p);
  checkPlan(p, gapped);
  INFO("DP runs: exact " << exact.dpRuns << ", with a 2% gap " << gapped.dpRuns);
  CHECK(gapped.cost >= exact.cost);
  CHECK(gapped.cost <= exact.cost * 1.02);
  CHECK(gapped.dpRuns * 4 < exact.dpRuns);
}

}  // namespace
}  // namespace meshflow::passes
