#include "passes/ShardingSearch.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>

namespace meshflow::passes::sharding {

namespace {

double least(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}

// Every cost is non-negative, so a partial objective plus a lower bound on what
// the open nodes add can be cut once it reaches the best complete one. The bound
// charges each edge to its later end, at its least over the earlier end's
// strategies. Strategies are tried in increasing order and only a strictly better
// objective replaces the best, so the answer is the lexicographically smallest
// optimum.
class Enumerator {
 public:
  /// Called, in `everyWithinCap` mode, with each choice within the cap and its value.
  using Visitor = std::function<void(const std::vector<int>&, double)>;

  Enumerator(const Residual& r, uint64_t maxVisits, double cap, bool firstWithinCap,
             Clock::time_point deadline, Visitor everyWithinCap = nullptr)
      : r_(r),
        choice_(r.nodes.size()),
        incident_(r.nodes.size()),
        bound_(cap),
        firstWithinCap_(firstWithinCap),
        everyWithinCap_(std::move(everyWithinCap)),
        maxVisits_(maxVisits),
        deadline_(deadline) {
    for (size_t e = 0; e < r.edges.size(); ++e) incident_[r.edges[e].b].push_back(e);
    size_t n = r.nodes.size();
    suffixMemory_.assign(n + 1, 0.0);
    suffixCost_.assign(n + 1, 0.0);
    for (size_t i = n; i-- > 0;) {
      suffixMemory_[i] = suffixMemory_[i + 1] + least(r.memory[i]);
      suffixCost_[i] = suffixCost_[i + 1] + leastWithEdges(i);
    }
  }

  SearchOutcome run() {
    visit(0, 0.0, 0.0);
    SearchOutcome out;
    out.choice = best_;
    out.value = best_ ? bound_ : kInfinity;
    out.complete = visits_ <= maxVisits_ && !timedOut_;
    out.visits = std::min(visits_, maxVisits_);
    return out;
  }

 private:
  double leastWithEdges(size_t i) const {
    double best = kInfinity;
    for (size_t k = 0; k < r_.cost[i].size(); ++k) {
      double c = r_.cost[i][k];
      for (size_t e : incident_[i]) {
        double m = kInfinity;
        for (int s = 0; s < r_.edges[e].cost.rows; ++s) m = std::min(m, r_.edges[e].cost.at(s, k));
        c += m;
      }
      best = std::min(best, c);
    }
    return best;
  }

  bool cut(double lowerBound) const {
    if (!std::isfinite(lowerBound)) return true;
    return best_ && !everyWithinCap_ ? lowerBound >= bound_ : lowerBound > bound_;
  }

  // Past the deadline (read every kClockStride steps) the search stops where
  // it is, as it does when its steps run out.
  bool pastDeadline() {
    if (timedOut_) return true;
    if (visits_ % kClockStride != 0 || deadline_ == kNoDeadline) return false;
    timedOut_ = Clock::now() > deadline_;
    return timedOut_;
  }

  void visit(size_t i, double cost, double memory) {
    if (stop_ || ++visits_ > maxVisits_ || pastDeadline()) return;
    if (cut(cost + suffixCost_[i])) return;
    if (r_.memoryActive && memory + suffixMemory_[i] > r_.budget) return;
    if (i == r_.nodes.size()) {
      if (everyWithinCap_) return everyWithinCap_(choice_, cost);
      bound_ = cost;
      best_ = choice_;
      stop_ = firstWithinCap_;
      return;
    }
    for (size_t k = 0; k < r_.cost[i].size() && !stop_; ++k) {
      choice_[i] = static_cast<int>(k);
      double c = cost + r_.cost[i][k];
      for (size_t e : incident_[i]) c += r_.edges[e].cost.at(choice_[r_.edges[e].a], k);
      double m = memory + (r_.memory[i].empty() ? 0.0 : r_.memory[i][k]);
      visit(i + 1, c, m);
    }
  }

  const Residual& r_;
  std::vector<int> choice_;
  std::vector<std::vector<size_t>> incident_;  // Edges by their later end.
  std::vector<double> suffixMemory_;
  std::vector<double> suffixCost_;
  std::optional<std::vector<int>> best_;
  double bound_;  // The cap, then the best objective found.
  bool firstWithinCap_;
  Visitor everyWithinCap_;
  bool stop_ = false;
  uint64_t maxVisits_;
  uint64_t visits_ = 0;
  Clock::time_point deadline_;
  bool timedOut_ = false;
};

// The residual's capped min-marginals, for single nodes and for the pairs that a
// fold left as some folded node's two neighbours, from one enumeration of every
// residual choice within the cap (far fewer than one search per node and
// strategy held fixed).
class ResidualTables {
 public:
  ResidualTables(const Residual& r, const EliminationPlan& plan, double cap)
      : r_(r), index_(plan.stepOf.size(), -1), cap_(cap) {
    for (size_t i = 0; i < r.nodes.size(); ++i) {
      index_[r.nodes[i]] = static_cast<int>(i);
      node_.emplace_back(r.cost[i].size(), kInfinity);
    }
    for (const EliminationStep& st : plan.steps) {
      if (st.n2 < 0 || plan.stepOf[st.n1] >= 0 || plan.stepOf[st.n2] >= 0) continue;
      auto key = std::pair{index_[st.n1], index_[st.n2]};
      pair_.try_emplace(key, int(r.cost[key.first].size()), int(r.cost[key.second].size()),
                        kInfinity);
    }
  }

  /// Fills the tables; false when the step budget ran out first.
  bool fill(StepBudget& budget) {
    if (r_.nodes.empty()) {
      best_ = r_.constant;
      return true;
    }
    auto record = [&](const std::vector<int>& c, double value) {
      double total = r_.constant + value;
      best_ = std::min(best_, total);
      for (size_t i = 0; i < c.size(); ++i) node_[i][c[i]] = std::min(node_[i][c[i]], total);
      for (auto& [key, m] : pair_) {
        double& v = m.at(c[key.first], c[key.second]);
        v = std::min(v, total);
      }
    };
    Enumerator e(r_, budget.left(), cap_ - r_.constant, false, budget.deadline(), record);
    SearchOutcome out = e.run();
    budget.spend(out.visits, out.complete);
    return out.complete;
  }

  double best() const { return best_; }

  double operator()(int a, int ka, int b, int kb) const {
    if (b < 0) return node_[index_[a]][ka];
    return pair_.at({index_[a], index_[b]}).at(ka, kb);
  }

 private:
  const Residual& r_;
  std::vector<int> index_;  // Original node -> residual index.
  double cap_;
  double best_ = kInfinity;
  std::vector<std::vector<double>> node_;
  std::map<std::pair<int, int>, Matrix> pair_;
};

}  // namespace

Residual buildResidual(const EliminationPlan& plan, const Folded& folded) {
  Residual r;
  std::vector<int> index(plan.stepOf.size(), -1);
  for (int n : plan.residual) {
    index[n] = static_cast<int>(r.nodes.size());
    r.nodes.push_back(n);
    r.cost.push_back(folded.cost[n]);
    r.memory.emplace_back();
  }
  for (int slot : plan.residualSlots) {
    auto [u, v] = plan.slotEnds[slot];
    r.edges.push_back({index[u], index[v], folded.slots[slot]});
  }
  r.constant = folded.constant;
  return r;
}

SearchOutcome searchResidual(const Residual& residual, uint64_t maxVisits, double cap,
                             bool firstWithinCap, Clock::time_point deadline) {
  if (residual.nodes.empty()) {
    // Nothing to search: the one empty choice, whatever the step limit.
    SearchOutcome out;
    if (cap >= 0) {
      out.choice.emplace();
      out.value = 0.0;
    }
    return out;
  }
  return Enumerator(residual, maxVisits, cap, firstWithinCap, deadline).run();
}

ExactOutcome solveExactly(const EliminationPlan& plan, const CostGraph& graph,
                          std::vector<std::vector<double>> cost, uint64_t maxVisits, double cap,
                          bool firstWithinCap, Clock::time_point deadline) {
  ExactOutcome out;
  Folded f = fold(plan, graph, std::move(cost));
  if (f.infeasibleNode >= 0 || f.constant > cap) return out;
  Residual r = buildResidual(plan, f);
  SearchOutcome s = searchResidual(r, maxVisits, cap - f.constant, firstWithinCap, deadline);
  out.complete = s.complete;
  out.visits = s.visits;
  if (!s.choice) return out;
  std::vector<int> choice(graph.nodes(), 0);
  for (size_t i = 0; i < r.nodes.size(); ++i) choice[r.nodes[i]] = (*s.choice)[i];
  backSubstitute(plan, f, choice);
  out.choice = std::move(choice);
  out.objective = f.constant + s.value;
  return out;
}

std::optional<std::vector<std::vector<double>>> exactMarginals(
    const EliminationPlan& plan, const CostGraph& graph, std::vector<std::vector<double>> cost,
    double cap, StepBudget& budget) {
  Folded f = fold(plan, graph, std::move(cost));
  budget.spend(2 * plan.foldSteps, true);  // The replay, and the backward pass.
  std::vector<std::vector<double>> none;
  for (const auto& c : f.cost) none.emplace_back(c.size(), kInfinity);
  if (f.infeasibleNode >= 0 || f.constant > cap) return none;
  Residual r = buildResidual(plan, f);
  ResidualTables tables(r, plan, cap);
  if (!tables.fill(budget)) return std::nullopt;
  if (!std::isfinite(tables.best())) return none;
  return minMarginals(plan, f, tables.best(), cap, std::cref(tables));
}

}  // namespace meshflow::passes::sharding
