// The intra-operator sharding solver: Alpa's ILP (OSDI'22, eq. 1).
//
// Choose one strategy per node to minimise Σ node cost + Σ edge (resharding) cost,
// subject to Σ chosen memory ≤ budget. The problem is first shrunk exactly (leaf
// nodes and nodes of degree two are folded into their neighbours, as dynamic
// programming on chains and trees does); what remains goes to a bounded branch
// and bound search, and when that does not finish, to COIN-OR CBC (the residual
// as Alpa's ILP) under a time budget. A binding memory budget is relaxed into the
// costs (Lagrangian relaxation), which keeps the problem shrinkable; a branch and
// bound on the relaxation's bounds closes the gap while CBC races it on a second
// thread under the same time budget; the first to prove the optimum stops the
// other, and the answer does not depend on which one that was.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace meshflow::passes {

struct ShardingNode {
  std::string name;
  std::vector<double> costs;   ///< One per strategy; finite and non-negative.
  std::vector<double> memory;  ///< Empty, or one per strategy (bytes per device).
};

struct ShardingEdge {
  int from = 0;
  int to = 0;
  /// costs[strategy of from][strategy of to]; +infinity marks an infeasible pair.
  std::vector<std::vector<double>> costs;
};

struct ShardingProblem {
  std::vector<ShardingNode> nodes;
  std::vector<ShardingEdge> edges;
  std::optional<double> memoryBudget;
};

struct SolveOptions {
  /// Wall-clock budget for the whole solve; when it runs out the best solution
  /// found so far is returned with optimal = false (and its proven lower bound).
  double timeBudgetSeconds = 10.0;
  /// CBC's deterministic work budget: branch-and-bound nodes (0 = none). Unlike
  /// the wall-clock budget, an answer reached when it runs out is the same on
  /// every run and machine, so set it (with a generous time budget as a
  /// backstop) wherever a timed-out answer must be reproducible.
  uint64_t resourceLimit = 0;
  /// Branch and bound tries the residual problem first and hands it to CBC after
  /// this many search steps (0 sends every residual problem to CBC; tests use it).
  /// Under a binding memory budget it also bounds each relaxed problem's search,
  /// and the Lagrangian search as a whole may spend 100 times as many steps (a
  /// relaxed problem costs a step per 64 strategy triples its folds look at, plus
  /// its search's; one searchLimit in all when shrinking leaves a residual of more
  /// than 8 nodes, whose relaxed problems are real searches), then hands what it
  /// has not proven to CBC.
  uint64_t searchLimit = 1000000;
  /// Under a binding memory budget, CBC races the Lagrangian search on a second
  /// thread from this many seconds on, unless the search has proven the optimum
  /// by then (negative: 2% of timeBudgetSeconds, so what the fast path settles
  /// in milliseconds never starts a thread). It changes the time taken, never a
  /// proven answer (docs/sharding.md, "How the engines race").
  double raceHeadStartSeconds = -1.0;
};

struct ShardingSolution {
  double objective = 0.0;
  std::vector<int> choice;  ///< Strategy index per node.
  bool optimal = true;      ///< False when the search's time or step budget ran out.
  /// A proven lower bound on the optimum: the objective itself when optimal, else
  /// what the search proved (objective − lowerBound is the gap left open).
  double lowerBound = 0.0;
  /// The gap left open, relative to the objective: (objective − lowerBound) /
  /// objective, 0 when optimal (or when the objective is 0).
  double gap() const { return objective > 0 ? (objective - lowerBound) / objective : 0.0; }
  /// alternatives[i][k]: the objective if node i took strategy k and every other
  /// node kept its choice (+infinity when that breaks an edge or the budget). For
  /// `explain`: why node i's choice beats each alternative.
  std::vector<std::vector<double>> alternatives;
  /// Nodes left after exact shrinking (for reports); under a binding budget, the
  /// nodes each relaxed problem searches, or those CBC searched if its answer won.
  size_t residualNodes = 0;
};

/// An invalid or infeasible problem; the message names the node, edge or budget.
class ShardingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Solves `problem` exactly when it can (optimal = true), deterministically: the
/// same problem and options give the same choice. A proven-optimal answer is the
/// lexicographically smallest choice vector among those whose objective equals
/// the optimum (within a relative 1e-9), so it does not depend on the path that
/// found it (nor on the order of the edges). An answer not proven optimal, or one
/// whose lexicographic form would cost more than a fixed number of search steps
/// (under a budget, with very many tied optima), is in local canonical form: no
/// node can switch to a lower-numbered strategy without raising the objective.
/// Throws ShardingError when the problem is malformed or infeasible.
/// CBC races the fast path on a second thread when the fast path does not close
/// the problem at once; which engine proves first never changes a proven answer
/// (docs/sharding.md, "How the engines race"). The calling thread waits for it:
/// no thread outlives the call.
ShardingSolution solveSharding(const ShardingProblem& problem, const SolveOptions& options);

}  // namespace meshflow::passes
