// Random problems of every family of bench/ShardingFamilies.h (transformer
// blocks, random, layered and wide DAGs), without and with a binding memory
// budget: small ones against brute force, larger ones against Alpa's ILP solved
// exactly by CBC, and a binding budget always ends with an answer that fits.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>
#include <string>

#include "bench/ShardingFamilies.h"
#include "passes/ShardingReferenceIlp.h"
#include "passes/ShardingSolver.h"
#include "tests/unit/sharding/SolverTestSupport.h"

using namespace meshflow;
using meshflow::passes::ShardingProblem;
using meshflow::passes::ShardingSolution;
using meshflow::passes::SolveOptions;
using meshflow::passes::solveSharding;
using meshflow::test::bruteForce;
using meshflow::test::evaluate;
using meshflow::test::memoryOf;

namespace {

using Family = std::function<ShardingProblem(unsigned seed)>;

struct Named {
  const char* name;
  Family make;
};

// At most 15 nodes and 2^15 choices: brute force stays quick.
const Named kSmall[] = {
    {"transformer", [](unsigned s) { return families::transformer(1, 2, s); }},
    {"random", [](unsigned s) { return families::randomDag(8, 2, 3, s); }},
    {"layered", [](unsigned s) { return families::layeredDag(2, 4, 3, s); }},
    {"wide", [](unsigned s) { return families::wideDag(2, 3, 3, s); }},
};

const Named kLarger[] = {
    {"transformer", [](unsigned s) { return families::transformer(2, 4, s); }},
    {"random", [](unsigned s) { return families::randomDag(40, 2, 6, s); }},
    {"layered", [](unsigned s) { return families::layeredDag(8, 4, 4, s); }},
    {"wide", [](unsigned s) { return families::wideDag(4, 6, 4, s); }},
};

// The least memory of any choice that avoids the infinite edges, by Alpa's ILP
// with memory as the cost.
double leastFeasibleMemory(const ShardingProblem& p) {
  passes::ReferenceIlpResult r = passes::solveReferenceIlp(meshflow::test::memoryAsCost(p), 120);
  REQUIRE(r.optimal);
  return memoryOf(p, *r.choice);
}

double most(const ShardingProblem& p) {
  double total = 0.0;
  for (const auto& n : p.nodes) total += *std::max_element(n.memory.begin(), n.memory.end());
  return total;
}

SolveOptions cbcAtOnce() {
  SolveOptions o;
  o.searchLimit = 0;  // Every residual (and the budgeted problem) goes to CBC.
  return o;
}

void checkOptimal(const ShardingProblem& p, const ShardingSolution& s, double optimum) {
  CHECK(s.optimal);
  CHECK(s.objective == Approx(optimum).epsilon(1e-6));
  CHECK(s.lowerBound == s.objective);
  CHECK(s.gap() == 0.0);
  CHECK(evaluate(p, s.choice) == Approx(s.objective).epsilon(1e-9));
  if (p.memoryBudget) CHECK(memoryOf(p, s.choice) <= *p.memoryBudget);
}

}  // namespace

TEST_CASE("families: small problems equal brute force on every path", "[sharding][families]") {
  for (const Named& family : kSmall) {
    for (unsigned seed = 0; seed < 10; ++seed) {
      for (double fraction : {-1.0, 0.1, 0.3, 0.6}) {
        ShardingProblem p = family.make(seed);
        if (fraction >= 0) p = families::withBudget(p, fraction);
        INFO(family.name << " seed " << seed << " budget fraction " << fraction);
        auto expected = bruteForce(p);
        if (!expected) continue;
        ShardingSolution fast = solveSharding(p, {});
        checkOptimal(p, fast, expected->optimum);
        CHECK(fast.choice == expected->smallest);
        ShardingSolution viaCbc = solveSharding(p, cbcAtOnce());
        checkOptimal(p, viaCbc, expected->optimum);
        CHECK(viaCbc.choice == fast.choice);
      }
    }
  }
}

TEST_CASE("families: larger problems equal Alpa's ILP solved exactly", "[sharding][families]") {
  for (const Named& family : kLarger) {
    for (unsigned seed : {1u, 2u}) {
      for (double fraction : {-1.0, 0.3}) {
        ShardingProblem p = family.make(seed);
        if (fraction >= 0) p = families::withBudget(p, fraction);
        INFO(family.name << " seed " << seed << " budget fraction " << fraction);
        passes::ReferenceIlpResult reference = passes::solveReferenceIlp(p, 120);
        REQUIRE(reference.optimal);
        ShardingSolution s = solveSharding(p, {});
        checkOptimal(p, s, evaluate(p, *reference.choice));
      }
    }
  }
}

TEST_CASE("families: a binding budget always yields an answer that fits",
          "[sharding][families][budget]") {
  const Named hard[] = {
      {"random", [](unsigned s) { return families::randomDag(120, 2, 8, s); }},
      {"layered", [](unsigned s) { return families::layeredDag(30, 4, 8, s); }},
      {"wide", [](unsigned s) { return families::wideDag(8, 10, 8, s); }},
  };
  // A wall clock generous enough for a loaded machine: what is checked is that
  // an answer that fits comes back, not how fast.
  SolveOptions quick;
  quick.timeBudgetSeconds = 30;
  for (const Named& family : hard) {
    ShardingProblem free = family.make(7);
    double least = leastFeasibleMemory(free);
    // The tightest budget that any choice meets (only the least-memory choices
    // avoiding the infinite edges fit), and one with a little room.
    for (double budget : {least, least + 0.05 * (most(free) - least)}) {
      ShardingProblem p = free;
      p.memoryBudget = budget;
      INFO(family.name << " budget " << budget << ", least " << least);
      ShardingSolution s = solveSharding(p, quick);
      CHECK(std::isfinite(s.objective));
      CHECK(memoryOf(p, s.choice) <= *p.memoryBudget);
      CHECK(evaluate(p, s.choice) == Approx(s.objective).epsilon(1e-9));
      CHECK(s.lowerBound <= s.objective);
      CHECK(s.lowerBound >= 0);
      CHECK((s.gap() >= 0 && s.gap() <= 1));
    }
  }
}

TEST_CASE("families: an optimum CBC proves is the same on every run",
          "[sharding][families][determinism]") {
  ShardingProblem p = families::withBudget(families::randomDag(50, 2, 8, 3), 0.3);
  ShardingSolution a = solveSharding(p, {});
  ShardingSolution b = solveSharding(p, {});
  REQUIRE(a.optimal);
  CHECK(a.choice == b.choice);
  CHECK(a.objective == b.objective);
}
