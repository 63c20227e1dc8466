// Internal to solveSharding: the problem as a graph of pairwise costs, the form
// every part of the solver (elimination, search, Lagrangian relaxation, CBC) reads.
#pragma once

#include <limits>
#include <vector>

#include "passes/ShardingSolver.h"

namespace meshflow::passes::sharding {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

/// The slack within which two objectives (or two memory totals) count as equal:
/// sums taken in different orders by different paths differ in their last bits.
double tolerance(double value);
bool sameObjective(double a, double b);

struct Matrix {
  int rows = 0;
  int cols = 0;
  std::vector<double> values;

  Matrix() = default;
  Matrix(int r, int c, double fill = 0.0) : rows(r), cols(c), values(size_t(r) * c, fill) {}
  double& at(int r, int c) { return values[size_t(r) * cols + c]; }
  double at(int r, int c) const { return values[size_t(r) * cols + c]; }
  Matrix transposed() const;
};

/// Node costs and edges between distinct nodes: parallel edges are summed and a
/// self-loop's diagonal is added to its node (both ends take the same strategy).
/// Edges are sorted by (u, v) with u < v; a cost matrix is [strategy of u][of v].
struct CostGraph {
  struct Edge {
    int u = 0;
    int v = 0;
    Matrix cost;
  };
  std::vector<std::vector<double>> cost;
  std::vector<Edge> edges;

  int nodes() const { return static_cast<int>(cost.size()); }
  int strategies(int n) const { return static_cast<int>(cost[n].size()); }
  /// The objective of a full choice (+infinity when it meets an infinite cost).
  double objective(const std::vector<int>& choice) const;
};

CostGraph buildCostGraph(const ShardingProblem& problem);

/// Per-device memory under a budget. Every feasibility judgement of the solver
/// goes through fits(), which sums in node order and compares with no slack, so
/// a returned answer meets the budget exactly.
struct MemoryBudget {
  std::vector<std::vector<double>> memory;  ///< Per node and strategy.
  double budget = 0.0;

  double total(const std::vector<int>& choice) const;
  bool fits(const std::vector<int>& choice) const { return total(choice) <= budget; }
};

}  // namespace meshflow::passes::sharding
