#include "passes/ShardingReferenceIlp.h"

#include <cmath>
#include <limits>

#include "passes/ShardingCbc.h"

namespace meshflow::passes {

namespace {

using sharding::Milp;

constexpr double kUnbounded = std::numeric_limits<double>::max();

// Rows first (CBC's columns are added with their entries in existing rows).
struct Rows {
  std::vector<int> oneStrategy;  // Per node.
  std::vector<int> onePair;      // Per edge.
  std::vector<int> fromSide;     // Per edge: first of its rows per `from` strategy.
  std::vector<int> toSide;       // Per edge: first of its rows per `to` strategy.
  int memory = -1;
};

Rows addRows(const ShardingProblem& p, Milp& milp) {
  Rows rows;
  for (size_t i = 0; i < p.nodes.size(); ++i) rows.oneStrategy.push_back(milp.addRow(1.0, 1.0));
  for (const ShardingEdge& e : p.edges) {
    rows.onePair.push_back(milp.addRow(1.0, 1.0));
    rows.fromSide.push_back(milp.rows());
    for (size_t s = 0; s < p.nodes[e.from].costs.size(); ++s) milp.addRow(-kUnbounded, 0.0);
    rows.toSide.push_back(milp.rows());
    for (size_t t = 0; t < p.nodes[e.to].costs.size(); ++t) milp.addRow(-kUnbounded, 0.0);
  }
  if (p.memoryBudget) rows.memory = milp.addRow(-kUnbounded, *p.memoryBudget);
  return rows;
}

}  // namespace

ReferenceIlpResult solveReferenceIlp(const ShardingProblem& p, double seconds) {
  Milp milp;
  Rows rows = addRows(p, milp);
  std::vector<std::vector<int>> column(p.nodes.size());
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    const ShardingNode& n = p.nodes[i];
    for (size_t k = 0; k < n.costs.size(); ++k) {
      std::vector<std::pair<int, double>> entries{{rows.oneStrategy[i], 1.0}};
      for (size_t e = 0; e < p.edges.size(); ++e) {
        if (p.edges[e].from == int(i)) entries.push_back({rows.fromSide[e] + int(k), -1.0});
        if (p.edges[e].to == int(i)) entries.push_back({rows.toSide[e] + int(k), -1.0});
      }
      if (rows.memory >= 0 && !n.memory.empty()) entries.push_back({rows.memory, n.memory[k]});
      column[i].push_back(milp.addColumn(n.costs[k], 1.0, true, entries));
    }
  }
  for (size_t e = 0; e < p.edges.size(); ++e) {
    const ShardingEdge& edge = p.edges[e];
    for (size_t s = 0; s < edge.costs.size(); ++s) {
      for (size_t t = 0; t < edge.costs[s].size(); ++t) {
        double c = edge.costs[s][t];
        bool allowed = std::isfinite(c);
        milp.addColumn(allowed ? c : 0.0, allowed ? 1.0 : 0.0, true,
                       {{rows.onePair[e], 1.0},
                        {rows.fromSide[e] + int(s), 1.0},
                        {rows.toSide[e] + int(t), 1.0}});
      }
    }
  }
  sharding::MilpResult r = milp.solve({seconds, 0});
  ReferenceIlpResult out;
  out.optimal = r.optimal && r.values.has_value();
  out.infeasible = r.infeasible;
  out.bound = r.bound;
  if (!r.values) return out;
  std::vector<int> choice(p.nodes.size(), 0);
  for (size_t i = 0; i < choice.size(); ++i) {
    for (size_t k = 0; k < column[i].size(); ++k) {
      if ((*r.values)[column[i][k]] > 0.5) choice[i] = static_cast<int>(k);
    }
  }
  out.choice = choice;
  return out;
}

}  // namespace meshflow::passes
