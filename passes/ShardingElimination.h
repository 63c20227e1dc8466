// Internal to solveSharding: exact shrinking as variable elimination.
//
// A node with at most two neighbours is folded away: a leaf into its neighbour's
// costs, a node of degree two into the edge between its neighbours. The folded
// node's best strategy depends only on its neighbours', so the optimum is kept;
// this is dynamic programming on chains and trees. Which nodes fold, and in what
// order, depends only on the graph's shape, so it is planned once and the plan is
// replayed for any costs (the Lagrangian relaxation folds the same graph with
// many different node costs).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "passes/ShardingGraph.h"

namespace meshflow::passes::sharding {

struct EliminationStep {
  int node = 0;
  int n1 = -1;  ///< Neighbours when the node is folded, n1 < n2; -1: none.
  int n2 = -1;
  int e1 = -1;  ///< Edge slots (node, n1) and (node, n2).
  int e2 = -1;
  int out = -1;  ///< Degree two: the slot of (n1, n2) that receives the fold.
};

/// Edges live in slots: first the graph's edges in order, then one per edge that
/// folding creates between two nodes not yet adjacent.
struct EliminationPlan {
  std::vector<EliminationStep> steps;
  std::vector<int> stepOf;         ///< Per node: its step, or -1 when it is never folded.
  std::vector<int> residual;       ///< The nodes never folded, increasing.
  std::vector<int> residualSlots;  ///< Slots alive at the end, by their ends.
  std::vector<std::pair<int, int>> slotEnds;  ///< Per slot (u, v), u < v.
  /// What one replay costs, in search steps: a step per 64 strategy triples (or
  /// pairs, or single strategies) the folds look at, and at least one.
  uint64_t foldSteps = 1;
};

/// Plans the folds in node order, repeatedly; nodes marked in `keep` are never
/// folded (they stay in the residual problem).
EliminationPlan planElimination(const CostGraph& graph, const std::vector<bool>& keep);

/// The numbers after replaying a plan.
struct Folded {
  /// Per node; a folded node's costs as they were when it was folded (with what
  /// was folded into it), a residual node's as they are at the end.
  std::vector<std::vector<double>> cost;
  std::vector<Matrix> slots;  ///< Oriented [strategy of u][strategy of v].
  double constant = 0.0;      ///< The least cost of every node folded with no neighbour.
  int infeasibleNode = -1;    ///< A node left with no finite strategy, if any.
};

/// Replays `plan` on `graph`'s edges with node costs `cost` (infinity rules a
/// strategy out).
Folded fold(const EliminationPlan& plan, const CostGraph& graph,
            std::vector<std::vector<double>> cost);

/// Sets every folded node, in reverse order, to its best strategy given its
/// neighbours (the lowest-numbered on a tie); `choice` holds the residual nodes'.
void backSubstitute(const EliminationPlan& plan, const Folded& folded, std::vector<int>& choice);

/// The least objective with residual node a on strategy ka (and, when b >= 0,
/// residual node b on kb), or +infinity when it exceeds the cap.
using ResidualMarginal = std::function<double(int a, int ka, int b, int kb)>;

/// Min-marginals: result[i][k] is the least objective of any choice with node i
/// on strategy k, or +infinity when that exceeds `cap`. `optimum` is the least
/// objective overall. Computed by a backward pass over the plan (a junction tree
/// whose clusters are a folded node and its neighbours); the residual nodes'
/// come from `residual`.
std::vector<std::vector<double>> minMarginals(const EliminationPlan& plan, const Folded& folded,
                                              double optimum, double cap,
                                              const ResidualMarginal& residual);

}  // namespace meshflow::passes::sharding
