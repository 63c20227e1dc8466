// libFuzzer target: the sharding problem JSON of `meshflow solve-sharding`, read
// and solved as the command does. A ShardingError is the expected outcome of a
// bad file; a crash, an escaped exception, a hang or an answer that is not what
// the solver claims (a choice out of range, an objective its choice does not
// cost) is a bug.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "passes/ShardingEvaluator.h"
#include "passes/ShardingProblemJson.h"
#include "passes/ShardingSolver.h"
#include "tests/fuzz/FuzzCheck.h"

namespace {

using namespace meshflow;
using fuzz::require;

// Small budgets keep each input fast: running out is an answer marked not
// optimal, which the checks below accept. With 2 s, inputs whose costs are
// near the doubles' limits ran the solver to the budget, their mutations did
// too, and the rate fell from thousands of inputs a second to ~150 as the
// corpus gained them (9 of 489 files, 1.8 s each). At 0.25 s and 200,000
// steps, 101 of 2,503 corpus files still ran ~180 ms (the step limit) and
// held the rate near 200/s: a twentieth of the inputs, most of the time.
// With 0.05 s and 40,000 steps they take ~45 ms (build/, gcc -O2). Running
// out early takes the same paths as running out late.
passes::SolveOptions fuzzingBudgets() {
  passes::SolveOptions options;
  options.timeBudgetSeconds = 0.05;
  options.resourceLimit = 40'000;
  options.searchLimit = 4'000;
  return options;
}

bool close(double a, double b) {
  return a == b || std::abs(a - b) <= 1e-9 * std::max(std::abs(a), std::abs(b));
}

void checkSolution(const passes::ShardingProblem& problem, const passes::ShardingSolution& s) {
  require(s.choice.size() == problem.nodes.size(), "one choice per node");
  for (std::size_t i = 0; i < s.choice.size(); ++i)
    require(s.choice[i] >= 0 &&
                static_cast<std::size_t>(s.choice[i]) < problem.nodes[i].costs.size(),
            "every choice is one of its node's strategies");
  const double cost = passes::sharding::Evaluator(problem).objective(s.choice);
  require(std::isfinite(s.objective), "a solution's objective is finite");
  require(close(cost, s.objective), "the objective is what the choice costs");
  require(!s.optimal || close(s.lowerBound, s.objective), "an optimal answer is its own bound");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  passes::ShardingProblem problem;
  try {
    problem = passes::parseShardingProblem(text);
  } catch (const passes::ShardingError&) {
    return 0;
  }
  // What the reader accepted prints to a file it reads back the same.
  const std::string printed = passes::printShardingProblem(problem);
  require(passes::printShardingProblem(passes::parseShardingProblem(printed)) == printed,
          "a printed problem reads back the same");
  try {
    passes::ShardingSolution solution = passes::solveSharding(problem, fuzzingBudgets());
    checkSolution(problem, solution);
    passes::printShardingSolution(solution);
  } catch (const passes::ShardingError&) {
  }
  return 0;
}
