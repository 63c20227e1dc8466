#include "passes/ShardingValidation.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace meshflow::passes::sharding {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

void validateNode(const ShardingProblem& p, size_t i) {
  const ShardingNode& n = p.nodes[i];
  if (n.costs.empty()) throw ShardingError(nodeLabel(p, i) + " has no strategies");
  for (size_t k = 0; k < n.costs.size(); ++k) {
    if (!std::isfinite(n.costs[k]) || n.costs[k] < 0) {
      throw ShardingError(
          fmt::format("{}: cost of strategy {} is {}; costs must be finite and "
                      "non-negative",
                      nodeLabel(p, i), k, n.costs[k]));
    }
  }
  if (!n.memory.empty() && n.memory.size() != n.costs.size()) {
    throw ShardingError(fmt::format("{} has {} strategies but {} memory entries", nodeLabel(p, i),
                                    n.costs.size(), n.memory.size()));
  }
  for (size_t k = 0; k < n.memory.size(); ++k) {
    if (!std::isfinite(n.memory[k]) || n.memory[k] < 0) {
      throw ShardingError(
          fmt::format("{}: memory of strategy {} is {}; memory must be finite "
                      "and non-negative",
                      nodeLabel(p, i), k, n.memory[k]));
    }
  }
}

void validateEdge(const ShardingProblem& p, size_t e) {
  const ShardingEdge& edge = p.edges[e];
  int n = static_cast<int>(p.nodes.size());
  if (edge.from < 0 || edge.from >= n || edge.to < 0 || edge.to >= n) {
    throw ShardingError(
        fmt::format("edge {} ({} -> {}) names a node outside 0..{}", e, edge.from, edge.to, n - 1));
  }
  size_t rows = p.nodes[edge.from].costs.size();
  size_t cols = p.nodes[edge.to].costs.size();
  if (edge.costs.size() != rows) {
    throw ShardingError(
        fmt::format("edge {} ({} -> {}): cost matrix has {} rows, expected {} "
                    "(strategies of node {})",
                    e, edge.from, edge.to, edge.costs.size(), rows, edge.from));
  }
  for (size_t r = 0; r < rows; ++r) {
    if (edge.costs[r].size() != cols) {
      throw ShardingError(
          fmt::format("edge {} ({} -> {}): row {} has {} entries, expected {} "
                      "(strategies of node {})",
                      e, edge.from, edge.to, r, edge.costs[r].size(), cols, edge.to));
    }
    for (size_t c = 0; c < cols; ++c) {
      double v = edge.costs[r][c];
      if (std::isnan(v) || v < 0 || v == -kInfinity) {
        throw ShardingError(
            fmt::format("edge {} ({} -> {}): cost [{}][{}] is {}; costs must be "
                        "non-negative (infinite marks an infeasible pair)",
                        e, edge.from, edge.to, r, c, v));
      }
    }
  }
}

void validateShape(const ShardingProblem& p) {
  for (size_t i = 0; i < p.nodes.size(); ++i) validateNode(p, i);
  for (size_t e = 0; e < p.edges.size(); ++e) validateEdge(p, e);
  if (p.memoryBudget && (!std::isfinite(*p.memoryBudget) || *p.memoryBudget < 0)) {
    throw ShardingError(
        fmt::format("memory budget {} must be finite and non-negative", *p.memoryBudget));
  }
}

// An edge with no finite entry rules out every assignment; say so by name rather
// than as an anonymous conflict found later.
void checkEdgesAllowSomePair(const ShardingProblem& p) {
  for (size_t e = 0; e < p.edges.size(); ++e) {
    bool any = false;
    for (const auto& row : p.edges[e].costs) {
      for (double v : row) any = any || std::isfinite(v);
    }
    if (!any) {
      throw ShardingError(
          fmt::format("infeasible: edge {} ({} -> {}) allows no pair of "
                      "strategies (every cost is infinite)",
                      e, p.edges[e].from, p.edges[e].to));
    }
  }
}

}  // namespace

std::string nodeLabel(const ShardingProblem& p, size_t i) {
  return fmt::format("node {} '{}'", i, p.nodes[i].name);
}

void validateProblem(const ShardingProblem& p) {
  validateShape(p);
  checkEdgesAllowSomePair(p);
}

}  // namespace meshflow::passes::sharding
