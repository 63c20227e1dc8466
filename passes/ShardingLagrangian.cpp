#include "passes/ShardingLagrangian.h"

#include <algorithm>
#include <cmath>

namespace meshflow::passes::sharding {

// A minimiser of a relaxed problem, judged on the real one.
struct LagrangianSearch::Point {
  std::vector<int> choice;
  double cost = 0.0;
  double memory = 0.0;
  bool fits = false;
};

// The best multiplier of one subproblem: `lower` is L at `lambda`; `lo` (too
// big) and `hi` (fits) minimise L there, or bracket it when the search stopped
// early because the bound already settled the subproblem.
struct LagrangianSearch::Dual {
  double lower = -kInfinity;
  double lambda = 0.0;
  std::optional<Point> lo;
  std::optional<Point> hi;
  bool infeasible = false;
};

namespace {

// The most multipliers tried per subproblem. The exact search takes as many as L
// has pieces near its maximum, a handful in practice; the cap guards against
// rounding making two lines cross again and again.
constexpr int kMaxMultipliers = 100;

enum class RuleOut { kNothing, kSome, kEverything };

}  // namespace

LagrangianSearch::LagrangianSearch(const CostGraph& graph, const MemoryBudget& memory,
                                   const EliminationPlan& plan, uint64_t perSearch,
                                   StepBudget& steps, Clock::time_point deadline)
    : graph_(graph),
      memoryGraph_(graph),
      memory_(memory),
      plan_(plan),
      perSearch_(perSearch),
      steps_(&steps),
      deadline_(deadline) {
  for (CostGraph::Edge& e : memoryGraph_.edges) {
    for (double& v : e.cost.values) v = std::isfinite(v) ? 0.0 : kInfinity;
  }
  incident_.resize(graph.nodes());
  for (size_t e = 0; e < graph.edges.size(); ++e) {
    incident_[graph.edges[e].u].push_back(e);
    incident_[graph.edges[e].v].push_back(e);
  }
}

// Single-node moves that lower the cost and keep the budget, until none does: a
// better answer found early lets the branch and bound cut more.
void LagrangianSearch::polish(std::vector<int>& choice, double& cost) const {
  double memory = memory_.total(choice);
  auto local = [&](size_t i, int k) {
    double c = graph_.cost[i][k];
    for (size_t e : incident_[i]) {
      const CostGraph::Edge& edge = graph_.edges[e];
      c += edge.u == int(i) ? edge.cost.at(k, choice[edge.v]) : edge.cost.at(choice[edge.u], k);
    }
    return c;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < choice.size(); ++i) {
      double here = local(i, choice[i]);
      for (int k = 0; k < graph_.strategies(int(i)); ++k) {
        double m = memory - memory_.memory[i][choice[i]] + memory_.memory[i][k];
        if (m > memory_.budget || !(local(i, k) < here - tolerance(cost))) continue;
        int old = choice[i];
        choice[i] = k;
        if (!memory_.fits(choice)) {  // The running sum rounded the other way.
          choice[i] = old;
          continue;
        }
        here = local(i, k);
        memory = memory_.total(choice);
        moved = true;
      }
    }
  }
  cost = graph_.objective(choice);
}

std::optional<LagrangianSearch::Point> LagrangianSearch::relaxed(const Costs& cost, double lambda) {
  Costs c = cost;
  for (size_t i = 0; i < c.size(); ++i) {
    for (size_t k = 0; k < c[i].size(); ++k) c[i][k] += lambda * memory_.memory[i][k];
  }
  return solve(graph_, std::move(c));
}

// The least memory any allowed choice needs (λ → ∞), edges kept only as what
// they allow.
std::optional<LagrangianSearch::Point> LagrangianSearch::leastMemory(const Costs& cost) {
  Costs c = cost;
  for (size_t i = 0; i < c.size(); ++i) {
    for (size_t k = 0; k < c[i].size(); ++k) {
      if (std::isfinite(c[i][k])) c[i][k] = memory_.memory[i][k];
    }
  }
  return solve(memoryGraph_, std::move(c));
}

// Solves `cost` on `graph` exactly within the step budget; the point is the
// choice with its objective on the real graph and its memory.
std::optional<LagrangianSearch::Point> LagrangianSearch::solve(const CostGraph& graph, Costs cost) {
  ExactOutcome r = solveExactly(plan_, graph, std::move(cost), std::min(perSearch_, steps_->left()),
                                kInfinity, false, deadline_);
  steps_->spend(plan_.foldSteps + r.visits, r.complete);
  exact_ = exact_ && r.complete;
  if (!r.choice) return std::nullopt;
  Point p{*r.choice, graph_.objective(*r.choice), memory_.total(*r.choice)};
  p.fits = p.memory <= memory_.budget;
  return p;
}

// Maximises L over λ for the choices `cost` allows. L is the lower envelope of one
// line per choice, cost + λ·(memory − budget); the lines of a too-big minimiser
// (rising) and a fitting one (falling) meet at the next λ to try, and when the
// minimiser there lies on both lines, that λ is the maximum.
LagrangianSearch::Dual LagrangianSearch::dual(const Costs& cost, double hint) {
  Dual d;
  std::optional<Point> zero = relaxed(cost, 0.0);
  if (!zero) {
    d.infeasible = true;
    return d;
  }
  offer(*zero);
  d.lower = zero->cost;
  if (zero->fits) {
    d.hi = zero;
    return d;
  }
  d.lo = zero;
  auto tryLambda = [&](double lambda) {
    std::optional<Point> p = relaxed(cost, lambda);
    if (!p) return p;
    offer(*p);
    double value = p->cost + lambda * (p->memory - memory_.budget);
    if (value > d.lower) {
      d.lower = value;
      d.lambda = lambda;
    }
    return p;
  };
  // A parent's best multiplier is usually close to its children's.
  if (hint > 0 && useful(d.lower)) {
    if (std::optional<Point> p = tryLambda(hint)) (p->fits ? d.hi : d.lo) = p;
  }
  if (!useful(d.lower)) return d;
  if (!d.hi) {
    std::optional<Point> m = leastMemory(cost);
    if (!m || !m->fits) {
      d.infeasible = true;
      return d;
    }
    offer(*m);
    d.hi = m;
  }
  for (int i = 0; i < kMaxMultipliers && useful(d.lower); ++i) {
    double lambda = std::max(0.0, (d.hi->cost - d.lo->cost) / (d.lo->memory - d.hi->memory));
    double meet = d.lo->cost + lambda * (d.lo->memory - memory_.budget);
    std::optional<Point> p = tryLambda(lambda);
    if (!p) break;
    double value = p->cost + lambda * (p->memory - memory_.budget);
    if (value >= meet - tolerance(meet)) break;
    (p->fits ? d.hi : d.lo) = p;
  }
  return d;
}

// Rules out every strategy whose Lagrangian min-marginal at λ shows that no
// choice using it can be useful.
bool LagrangianSearch::ruleOut(Costs& cost, double lambda) {
  double threshold = findMode_ ? cap_ : upper_ - tolerance(upper_);
  if (!std::isfinite(threshold)) return false;
  Costs c = cost;
  for (size_t i = 0; i < c.size(); ++i) {
    for (size_t k = 0; k < c[i].size(); ++k) c[i][k] += lambda * memory_.memory[i][k];
  }
  auto marginals =
      exactMarginals(plan_, graph_, std::move(c), threshold + lambda * memory_.budget, *steps_);
  if (!marginals) return false;
  bool changed = false;
  for (size_t i = 0; i < cost.size(); ++i) {
    for (size_t k = 0; k < cost[i].size(); ++k) {
      if (std::isfinite(cost[i][k]) && !std::isfinite((*marginals)[i][k])) {
        cost[i][k] = kInfinity;
        changed = true;
      }
    }
  }
  return changed;
}

void LagrangianSearch::branch(Costs cost, double hint) {
  if (findMode_ && best_) return;
  if (outOfTime()) {
    complete_ = false;
    return;
  }
  Dual d = dual(cost, hint);
  if (!exact_) {
    complete_ = false;
    return;
  }
  if (d.infeasible || !useful(d.lower)) return;
  if (ruleOut(cost, d.lambda)) return branch(std::move(cost), d.lambda);
  // Branch on a node where the two minimisers disagree: each child excludes one.
  int node = -1;
  auto open = [&](size_t i) {
    return std::count_if(cost[i].begin(), cost[i].end(), [](double v) { return std::isfinite(v); });
  };
  for (size_t i = 0; i < cost.size() && node < 0; ++i) {
    if (open(i) == 0) return;  // Every strategy of node i is ruled out.
    if (d.lo && d.hi && d.lo->choice[i] != d.hi->choice[i] && open(i) > 1) node = int(i);
  }
  for (size_t i = 0; i < cost.size() && node < 0; ++i) {
    if (open(i) > 1) node = int(i);
  }
  if (node < 0) return;  // A single choice left: the relaxation judged it already.
  for (size_t k = 0; k < cost[node].size(); ++k) {
    if (!std::isfinite(cost[node][k])) continue;
    Costs child = cost;
    for (size_t j = 0; j < child[node].size(); ++j) {
      if (j != k) child[node][j] = kInfinity;
    }
    branch(std::move(child), d.lambda);
    if (!complete_ || (findMode_ && best_)) return;
  }
}

bool LagrangianSearch::useful(double lowerBound) const {
  if (findMode_) return lowerBound <= cap_;
  return !std::isfinite(upper_) || lowerBound < upper_ - tolerance(upper_);
}

void LagrangianSearch::offer(const Point& p) {
  if (!p.fits) return;
  if (findMode_) {
    if (!best_ && p.cost <= cap_) {
      best_ = p.choice;
      upper_ = p.cost;
    }
    return;
  }
  if (!(p.cost < upper_)) return;
  std::vector<int> choice = p.choice;
  double cost = p.cost;
  polish(choice, cost);
  if (!(cost < upper_)) return;
  best_ = std::move(choice);
  upper_ = cost;
}

bool LagrangianSearch::outOfTime() {
  return steps_->left() == 0 || steps_->exhausted() || Clock::now() > deadline_ ||
         (stopWhen_ && stopWhen_());
}

BudgetedOutcome LagrangianSearch::minimise() {
  findMode_ = false;
  best_.reset();
  upper_ = kInfinity;
  exact_ = complete_ = true;
  BudgetedOutcome out;
  Dual root = dual(graph_.cost, 0.0);
  if (exact_ && root.infeasible) {
    out.infeasible = true;
    return out;
  }
  if (exact_) {
    rootLambda_ = root.lambda;
    out.lower = root.lower;
    if (useful(root.lower)) branch(graph_.cost, root.lambda);
  }
  out.choice = best_;
  out.upper = upper_;
  if (exact_ && complete_) {
    out.infeasible = !best_;
    out.optimal = best_.has_value();
    if (best_) out.lower = upper_;
  }
  return out;
}

std::optional<std::vector<int>> LagrangianSearch::findWithin(std::vector<std::vector<double>> cost,
                                                             double cap, bool& settled) {
  findMode_ = true;
  cap_ = cap;
  best_.reset();
  upper_ = kInfinity;
  exact_ = complete_ = true;
  branch(std::move(cost), rootLambda_);
  settled = best_.has_value() || (exact_ && complete_);
  findMode_ = false;
  return best_;
}

std::optional<std::vector<std::vector<double>>> LagrangianSearch::bounds(double cap) {
  Costs c = graph_.cost;
  for (size_t i = 0; i < c.size(); ++i) {
    for (size_t k = 0; k < c[i].size(); ++k) c[i][k] += rootLambda_ * memory_.memory[i][k];
  }
  double shift = rootLambda_ * memory_.budget;
  auto m = exactMarginals(plan_, graph_, std::move(c), cap + shift, *steps_);
  if (!m) return std::nullopt;
  for (auto& row : *m) {
    for (double& v : row) {
      if (std::isfinite(v)) v -= shift;
    }
  }
  return m;
}

}  // namespace meshflow::passes::sharding
