#include "passes/ShardingNeighbourhood.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace meshflow::passes::sharding {

namespace {

// One window's search stops after this many steps; the best it found by then
// is still used (it is a real choice, judged exactly like any other).
constexpr uint64_t kWindowSteps = 20000;

struct Neighbour {
  int node = 0;
  size_t edge = 0;
};

class Windows {
 public:
  Windows(const CostGraph& g, const MemoryBudget* memory) : g_(g), memory_(memory) {
    adjacent_.resize(g.nodes());
    for (size_t e = 0; e < g.edges.size(); ++e) {
      adjacent_[g.edges[e].u].push_back({g.edges[e].v, e});
      adjacent_[g.edges[e].v].push_back({g.edges[e].u, e});
    }
    for (auto& list : adjacent_) {
      std::sort(list.begin(), list.end(),
                [](const Neighbour& a, const Neighbour& b) { return a.node < b.node; });
    }
    index_.assign(g.nodes(), -1);
  }

  /// Re-solves the window around `start`; true when the choice improved.
  bool improve(int start, std::vector<int>& choice, StepBudget& steps) {
    std::vector<int> window = windowAround(start);
    for (size_t i = 0; i < window.size(); ++i) index_[window[i]] = static_cast<int>(i);
    Residual r = windowProblem(window, choice);
    double here = 0.0;
    for (size_t i = 0; i < window.size(); ++i) here += r.cost[i][choice[window[i]]];
    for (const Residual::Edge& e : r.edges) {
      here += e.cost.at(choice[window[e.a]], choice[window[e.b]]);
    }
    for (int n : window) index_[n] = -1;
    double before = g_.objective(choice);
    double cap = here - tolerance(before);
    SearchOutcome s = searchResidual(r, std::min(kWindowSteps, steps.left()), cap, false,
                                     steps.deadline());
    steps.spend(s.visits, true);
    if (!s.choice) return false;
    std::vector<int> tried = choice;
    for (size_t i = 0; i < window.size(); ++i) tried[window[i]] = (*s.choice)[i];
    // Judged exactly on the whole problem: sums in another order must not let
    // a choice over the budget (or no better) through.
    if (!(g_.objective(tried) < before) || (memory_ && !memory_->fits(tried))) return false;
    choice = std::move(tried);
    return true;
  }

 private:
  // `start` and its nearest neighbours, breadth first, lower-numbered first;
  // sorted.
  std::vector<int> windowAround(int start) const {
    std::vector<int> window{start};
    for (size_t head = 0; head < window.size() && window.size() < kWindowNodes; ++head) {
      for (const Neighbour& nb : adjacent_[window[head]]) {
        if (window.size() >= kWindowNodes) break;
        if (std::find(window.begin(), window.end(), nb.node) == window.end()) {
          window.push_back(nb.node);
        }
      }
    }
    std::sort(window.begin(), window.end());
    return window;
  }

  // The window's nodes with the edges to fixed nodes folded into their costs,
  // the edges inside it, and what the fixed nodes leave of the budget.
  Residual windowProblem(const std::vector<int>& window, const std::vector<int>& choice) const {
    Residual r;
    r.nodes = window;
    for (int n : window) {
      std::vector<double> cost = g_.cost[n];
      for (const Neighbour& nb : adjacent_[n]) {
        if (index_[nb.node] >= 0) continue;
        const CostGraph::Edge& e = g_.edges[nb.edge];
        for (size_t k = 0; k < cost.size(); ++k) {
          int kk = static_cast<int>(k);
          cost[k] += e.u == n ? e.cost.at(kk, choice[e.v]) : e.cost.at(choice[e.u], kk);
        }
      }
      r.cost.push_back(std::move(cost));
      r.memory.push_back(memory_ ? memory_->memory[n] : std::vector<double>{});
    }
    for (const CostGraph::Edge& e : g_.edges) {
      if (index_[e.u] >= 0 && index_[e.v] >= 0) r.edges.push_back({index_[e.u], index_[e.v], e.cost});
    }
    if (memory_) {
      r.memoryActive = true;
      r.budget = memory_->budget;
      for (int n = 0; n < g_.nodes(); ++n) {
        if (index_[n] < 0) r.budget -= memory_->memory[n][choice[n]];
      }
      // The window's sum is judged exactly afterwards: a tolerance here keeps a
      // choice on the budget exactly from being cut by rounding.
      r.budget += tolerance(memory_->budget);
    }
    return r;
  }

  const CostGraph& g_;
  const MemoryBudget* memory_;
  std::vector<std::vector<Neighbour>> adjacent_;
  std::vector<int> index_;  // Per node: its place in the window being built, or -1.
};

}  // namespace

void improveByWindows(const CostGraph& g, const MemoryBudget* memory, std::vector<int>& choice,
                      StepBudget& steps, const std::function<bool()>& stop) {
  if (!std::isfinite(g.objective(choice)) || (memory && !memory->fits(choice))) return;
  Windows windows(g, memory);
  auto over = [&] {
    return steps.left() == 0 || Clock::now() > steps.deadline() || (stop && stop());
  };
  for (bool improved = true; improved && !over();) {
    improved = false;
    for (int start = 0; start < g.nodes() && !over(); ++start) {
      improved = windows.improve(start, choice, steps) || improved;
    }
  }
}

}  // namespace meshflow::passes::sharding
