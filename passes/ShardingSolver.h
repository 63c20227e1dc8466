// The intra-operator sharding solver: Alpa's ILP (OSDI'22, eq. 1).
//
// Choose one strategy per node to minimise Σ node cost + Σ edge (resharding) cost,
// subject to Σ chosen memory ≤ budget. The problem is first shrunk exactly (leaf
// nodes and nodes of degree two are folded into their neighbours, as dynamic
// programming on chains and trees does); what remains goes to a bounded branch
// and bound search, and when that does not finish, to Z3's optimiser under a time
// budget.
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
  /// Wall-clock budget for Z3; when it runs out the best solution found so far is
  /// returned with optimal = false.
  double timeBudgetSeconds = 10.0;
  /// Z3's deterministic resource budget ("rlimit": counted work, not time; 0 =
  /// none). Unlike the wall-clock budget, an answer reached when it runs out is
  /// the same on every run and machine, so set it (with a generous time budget
  /// as a backstop) wherever a timed-out answer must be reproducible.
  uint64_t resourceLimit = 0;
  /// Branch and bound tries the residual problem first and hands it to Z3 after
  /// this many search steps (0 sends every residual problem to Z3; tests use it).
  uint64_t searchLimit = 1000000;
};

struct ShardingSolution {
  double objective = 0.0;
  std::vector<int> choice;  ///< Strategy index per node.
  bool optimal = true;      ///< False when Z3's time budget ran out.
  /// alternatives[i][k]: the objective if node i took strategy k and every other
  /// node kept its choice (+infinity when that breaks an edge or the budget). For
  /// `explain`: why node i's choice beats each alternative.
  std::vector<std::vector<double>> alternatives;
  size_t residualNodes = 0;  ///< Nodes left after exact shrinking (for reports).
};

/// An invalid or infeasible problem; the message names the node, edge or budget.
class ShardingError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Solves `problem` exactly when it can (optimal = true), deterministically: the
/// same problem and options give the same choice. Among equal objectives the
/// choice is canonical in that no node can switch to a lower-numbered strategy
/// without raising the objective. Throws ShardingError when the problem is
/// malformed or infeasible.
/// Z3 runs with its default (fixed) random seeds: meshflow never sets Z3's global
/// parameters, so two solvers in one process cannot disturb each other.
ShardingSolution solveSharding(const ShardingProblem& problem, const SolveOptions& options);

}  // namespace meshflow::passes
