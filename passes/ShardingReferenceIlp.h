// The reference for benchmarks and tests: Alpa's own formulation of the
// intra-operator ILP (OSDI'22 eq. 1, as Alpa's auto_sharding.py writes it) on
// the whole problem, solved by COIN-OR CBC, the solver Alpa uses. Binaries
// s[i][k] (one strategy per node) and e[edge][s][t] (one pair per edge), each
// pair at most its ends (Σ_t e[s][t] ≤ s[from][s], Σ_s e[s][t] ≤ s[to][t]),
// infinite pairs fixed to 0, memory one row. No folding, no bound of meshflow's:
// what a user of Alpa's pass would get.
#pragma once

#include <optional>
#include <vector>

#include "passes/ShardingSolver.h"

namespace meshflow::passes {

struct ReferenceIlpResult {
  std::optional<std::vector<int>> choice;  ///< None when CBC found no answer.
  bool optimal = false;                    ///< CBC proved it optimal.
  bool infeasible = false;                 ///< CBC proved that nothing is feasible.
  double bound = 0.0;                      ///< CBC's proven lower bound.
};

ReferenceIlpResult solveReferenceIlp(const ShardingProblem& problem, double seconds);

}  // namespace meshflow::passes
