#include "passes/ShardingEvaluator.h"

#include <cmath>

#include "passes/ShardingGraph.h"

namespace meshflow::passes::sharding {

namespace {

double memoryOf(const ShardingProblem& p, size_t i, int k) {
  return p.nodes[i].memory.empty() ? 0.0 : p.nodes[i].memory[k];
}

}  // namespace

Evaluator::Evaluator(const ShardingProblem& p) : p_(p), incident_(p.nodes.size()) {
  for (size_t e = 0; e < p.edges.size(); ++e) {
    incident_[p.edges[e].from].push_back(e);
    if (p.edges[e].to != p.edges[e].from) incident_[p.edges[e].to].push_back(e);
  }
}

double Evaluator::objective(const std::vector<int>& c) const {
  double total = 0.0;
  for (size_t i = 0; i < p_.nodes.size(); ++i) total += p_.nodes[i].costs[c[i]];
  for (const ShardingEdge& e : p_.edges) total += e.costs[c[e.from]][c[e.to]];
  if (!fits(c)) return kInfinity;
  return total;
}

// Whether c meets the budget. The sum runs in node order, as MemoryBudget::total
// does, so every part of the solver agrees.
bool Evaluator::fits(const std::vector<int>& c) const {
  if (!p_.memoryBudget) return true;
  double memory = 0.0;
  for (size_t j = 0; j < c.size(); ++j) memory += memoryOf(p_, j, c[j]);
  return memory <= *p_.memoryBudget;
}

// Whether c with node i on strategy k meets the budget, summed the same way.
bool Evaluator::fitsSwitched(const std::vector<int>& c, size_t i, int k) const {
  if (!p_.memoryBudget) return true;
  double memory = 0.0;
  for (size_t j = 0; j < c.size(); ++j) memory += memoryOf(p_, j, j == i ? k : c[j]);
  return memory <= *p_.memoryBudget;
}

double Evaluator::switched(const std::vector<int>& c, double current, size_t i, int k) const {
  if (k == c[i]) return current;
  if (!fitsSwitched(c, i, k)) return kInfinity;
  return current - local(c, i, c[i]) + local(c, i, k);
}

// Node i's own cost and its edges' costs with i on strategy k.
double Evaluator::local(const std::vector<int>& c, size_t i, int k) const {
  double total = p_.nodes[i].costs[k];
  for (size_t e : incident_[i]) {
    const ShardingEdge& edge = p_.edges[e];
    int a = edge.from == static_cast<int>(i) ? k : c[edge.from];
    int b = edge.to == static_cast<int>(i) ? k : c[edge.to];
    total += edge.costs[a][b];
  }
  return total;
}

std::vector<std::vector<double>> Evaluator::alternatives(const std::vector<int>& c) const {
  double current = objective(c);
  std::vector<std::vector<double>> out(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    for (size_t k = 0; k < p_.nodes[i].costs.size(); ++k) {
      int ki = static_cast<int>(k);
      out[i].push_back(ki == c[i] ? current : switched(c, current, i, ki));
    }
  }
  return out;
}

void Evaluator::canonicaliseLocally(std::vector<int>& c) const {
  double current = objective(c);
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < c.size(); ++i) {
      for (int k = 0; k < c[i]; ++k) {
        double v = switched(c, current, i, k);
        if (v <= current || sameObjective(v, current)) {
          c[i] = k;
          current = objective(c);
          moved = true;
          break;
        }
      }
    }
  }
}

// Single-node improvements until none helps. Infeasible moves evaluate to
// infinity, so a feasible start stays feasible.
void Evaluator::improveLocally(std::vector<int>& c) const {
  double current = objective(c);
  for (bool improved = true; improved;) {
    improved = false;
    for (size_t i = 0; i < c.size(); ++i) {
      for (size_t k = 0; k < p_.nodes[i].costs.size(); ++k) {
        // A full evaluation: the start may be infeasible (objective infinite).
        std::vector<int> trial = c;
        trial[i] = static_cast<int>(k);
        double v = objective(trial);
        if (v < current && !sameObjective(v, current)) {
          c = std::move(trial);
          current = v;
          improved = true;
        }
      }
    }
  }
}

std::optional<std::vector<int>> Evaluator::localSearch() const {
  std::vector<int> greedy(p_.nodes.size(), 0), lean(p_.nodes.size(), 0);
  for (size_t i = 0; i < p_.nodes.size(); ++i) {
    double best = kInfinity;
    for (size_t k = 0; k < p_.nodes[i].costs.size(); ++k) {
      int ki = static_cast<int>(k);
      std::vector<int> trial = greedy;
      trial[i] = ki;
      double v = objective(trial);
      if (v < best) {
        best = v;
        greedy[i] = ki;
      }
      if (memoryOf(p_, i, ki) < memoryOf(p_, i, lean[i])) lean[i] = ki;
    }
  }
  improveLocally(greedy);
  improveLocally(lean);
  std::vector<int>& best = objective(lean) < objective(greedy) ? lean : greedy;
  if (!std::isfinite(objective(best))) return std::nullopt;
  return best;
}

}  // namespace meshflow::passes::sharding
