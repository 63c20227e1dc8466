// CBC races the fast path on a second thread; which engine proves the optimum
// first depends on timing, the answer must not. Each problem is solved with the
// race starting at once, with threads hogging the processors alongside (which
// shifts who wins), and with CBC alone, and must give the answer of a plain
// solve every time.
#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "passes/ShardingSolver.h"
#include "tests/unit/sharding/SolverTestSupport.h"

using meshflow::passes::ShardingProblem;
using meshflow::passes::ShardingSolution;
using meshflow::passes::SolveOptions;
using meshflow::passes::solveSharding;
using namespace meshflow::test;

namespace {

// Busy loops on `count` threads for as long as it lives: the machine's
// processors taken, so the two engines' timings shift.
class CpuHogs {
 public:
  explicit CpuHogs(int count) {
    for (int i = 0; i < count; ++i) {
      threads_.emplace_back([this] {
        volatile double x = 1.0;
        while (!done_.load(std::memory_order_relaxed)) x = std::sqrt(x + 1.0);
      });
    }
  }
  ~CpuHogs() {
    done_.store(true);
    for (std::thread& t : threads_) t.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::vector<std::thread> threads_;
};

struct Named {
  std::string name;
  ShardingProblem problem;
};

std::vector<Named> racedProblems() {
  namespace f = meshflow::families;
  return {
      // The Lagrangian search proves these in milliseconds, CBC in 0.1-0.5 s.
      {"transformer 2 x 8, budget", transformerProblem(2, 8, 1, 0.3)},
      {"transformer 2 x 6 with ties, budget", withTies(transformerProblem(2, 6, 2, 0.3))},
      // The Lagrangian search gives up (a residual of 24 nodes), CBC proves.
      {"random 25 x 2..8, budget", f::withBudget(f::randomDag(25, 2, 8, 44), 0.3)},
  };
}

// The least memory of any choice that avoids the infinite edges: the solver on
// memory as the cost.
double leastFeasibleMemory(const ShardingProblem& p) {
  ShardingSolution s = solveSharding(memoryAsCost(p), {});
  REQUIRE(s.optimal);
  return memoryOf(p, s.choice);
}

}  // namespace

TEST_CASE("race: the answer does not depend on which engine proves first",
          "[sharding][race][determinism]") {
  SolveOptions racing;
  racing.raceHeadStartSeconds = 0;  // CBC beside the fast path from the start.
  SolveOptions cbcAlone;
  cbcAlone.searchLimit = 1;  // The fast path gives up at once.
  for (const Named& n : racedProblems()) {
    INFO(n.name);
    ShardingSolution reference = solveSharding(n.problem, {});
    REQUIRE(reference.optimal);
    auto same = [&](const ShardingSolution& s) {
      CHECK(s.optimal);
      CHECK(s.choice == reference.choice);
      CHECK(s.objective == reference.objective);
    };
    same(solveSharding(n.problem, racing));
    same(solveSharding(n.problem, racing));
    same(solveSharding(n.problem, cbcAlone));
    CpuHogs hogs(2);
    same(solveSharding(n.problem, racing));
  }
}

TEST_CASE("race: a binding budget yields an answer that fits in a short time budget under load",
          "[sharding][race][budget]") {
  ShardingProblem free = meshflow::families::layeredDag(15, 4, 8, 7);
  double least = leastFeasibleMemory(free);
  double most = *meshflow::families::withBudget(free, 1.0).memoryBudget;
  SolveOptions quick;
  quick.timeBudgetSeconds = 2;
  CpuHogs hogs(2);
  // A budget just above the least memory any choice needs (the tightest is
  // tests/unit/sharding/ShardingFamiliesTest.cpp's, with a longer time budget:
  // only an optimal solve of the memory problem meets it).
  ShardingProblem p = free;
  p.memoryBudget = least + 0.02 * (most - least);
  INFO("budget " << *p.memoryBudget << ", least " << least);
  ShardingSolution s = solveSharding(p, quick);
  CHECK(std::isfinite(s.objective));
  CHECK(memoryOf(p, s.choice) <= *p.memoryBudget);
  CHECK(evaluate(p, s.choice) == Approx(s.objective).epsilon(1e-9));
  CHECK(s.lowerBound <= s.objective);
}

