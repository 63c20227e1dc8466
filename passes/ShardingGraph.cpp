#include "passes/ShardingGraph.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

namespace meshflow::passes::sharding {

double tolerance(double value) { return 1e-9 * std::max(1.0, std::fabs(value)); }

bool sameObjective(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return a == b;
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

Matrix Matrix::transposed() const {
  Matrix t(cols, rows);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) t.at(c, r) = at(r, c);
  }
  return t;
}

double CostGraph::objective(const std::vector<int>& choice) const {
  double total = 0.0;
  for (size_t i = 0; i < cost.size(); ++i) total += cost[i][choice[i]];
  for (const Edge& e : edges) total += e.cost.at(choice[e.u], choice[e.v]);
  return total;
}

CostGraph buildCostGraph(const ShardingProblem& problem) {
  CostGraph g;
  for (const ShardingNode& n : problem.nodes) g.cost.push_back(n.costs);
  // A std::map keyed by (u, v) sums parallel edges and yields them sorted.
  std::map<std::pair<int, int>, Matrix> merged;
  for (const ShardingEdge& e : problem.edges) {
    int rows = static_cast<int>(e.costs.size()), cols = static_cast<int>(e.costs[0].size());
    if (e.from == e.to) {
      for (int k = 0; k < rows; ++k) g.cost[e.from][k] += e.costs[k][k];
      continue;
    }
    Matrix m(rows, cols);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) m.at(r, c) = e.costs[r][c];
    }
    if (e.from > e.to) m = m.transposed();
    auto key = std::minmax(e.from, e.to);
    auto [it, inserted] = merged.emplace(key, m);
    if (inserted) continue;
    for (size_t i = 0; i < m.values.size(); ++i) it->second.values[i] += m.values[i];
  }
  for (auto& [key, m] : merged) g.edges.push_back({key.first, key.second, std::move(m)});
  return g;
}

double MemoryBudget::total(const std::vector<int>& choice) const {
  double sum = 0.0;
  for (size_t i = 0; i < memory.size(); ++i) sum += memory[i][choice[i]];
  return sum;
}

}  // namespace meshflow::passes::sharding
