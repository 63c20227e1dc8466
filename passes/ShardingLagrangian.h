// Internal to solveSharding: the memory budget by Lagrangian relaxation.
//
// A binding budget couples every node whose memory varies, so exact shrinking
// cannot fold them. Relaxing the budget with a multiplier λ ≥ 0 gives
//   L(λ) = min over choices of  cost + λ·(memory − budget),
// an unconstrained problem that shrinking solves exactly (memory folds into the
// node costs). Every L(λ) is a lower bound on the budgeted optimum and every
// minimiser that fits is an upper bound. The best λ is found exactly by
// intersecting the lines of the cheapest-too-big and the best-fitting minimiser
// (L is concave and piecewise linear). A gap left between the bounds is closed
// by branch and bound: each subproblem (some strategies ruled out) is bounded by
// its own L, strategies whose Lagrangian min-marginal already exceeds the best
// answer are ruled out, and the search branches on a node where the two
// minimisers disagree.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "passes/ShardingSearch.h"

namespace meshflow::passes::sharding {

struct BudgetedOutcome {
  std::optional<std::vector<int>> choice;  ///< The best choice found that fits.
  double upper = kInfinity;                ///< Its objective.
  /// A proven lower bound on the optimum (the root's, or the optimum itself);
  /// -infinity when the root's relaxed problems were too hard to solve exactly.
  double lower = -kInfinity;
  bool optimal = false;                    ///< upper is proven optimal.
  bool infeasible = false;                 ///< Proven: no choice fits.
};

class LagrangianSearch {
 public:
  /// `plan` folds `graph` with no node kept. A relaxed problem whose residual
  /// search needs more than `perSearch` steps makes the search give up (its bound
  /// would not be exact); the whole search stops when `steps` runs out (a relaxed
  /// problem costs the plan's foldSteps plus its residual search's steps) or at
  /// `deadline`.
  LagrangianSearch(const CostGraph& graph, const MemoryBudget& memory, const EliminationPlan& plan,
                   uint64_t perSearch, StepBudget& steps, Clock::time_point deadline);

  /// The least objective within the budget, by relaxation then branch and bound.
  BudgetedOutcome minimise();

  /// Later searches have these limits instead (and no stopWhen).
  void limit(uint64_t perSearch, StepBudget& steps, Clock::time_point deadline) {
    perSearch_ = perSearch;
    steps_ = &steps;
    deadline_ = deadline;
    stopWhen_ = nullptr;
  }

  /// The best objective found so far within the budget (infinity: none yet).
  double upper() const { return upper_; }

  /// The search also gives up once `stop` returns true (asked between branches:
  /// another engine proved first).
  void stopWhen(std::function<bool()> stop) { stopWhen_ = std::move(stop); }

  /// A choice within the budget and with objective at most `cap`, among those
  /// `cost` allows (infinity rules a strategy out); nothing when there is none or
  /// the search gave up (then `settled` is set to false).
  std::optional<std::vector<int>> findWithin(std::vector<std::vector<double>> cost, double cap,
                                             bool& settled);

  /// Lower bounds per (node, strategy) on the objective of any choice within the
  /// budget with that node on that strategy (+infinity above `cap`), from the
  /// best multiplier minimise() found; nothing when they cannot be computed.
  std::optional<std::vector<std::vector<double>>> bounds(double cap);

 private:
  struct Point;
  struct Dual;
  using Costs = std::vector<std::vector<double>>;

  std::optional<Point> relaxed(const Costs& cost, double lambda);
  std::optional<Point> leastMemory(const Costs& cost);
  std::optional<Point> solve(const CostGraph& graph, Costs cost);
  Dual dual(const Costs& cost, double hint);
  void branch(Costs cost, double hint);
  bool ruleOut(Costs& cost, double lambda);
  bool useful(double lowerBound) const;
  void offer(const Point& p);
  void polish(std::vector<int>& choice, double& cost) const;
  bool outOfTime();

  const CostGraph& graph_;
  CostGraph memoryGraph_;                      // The graph's edges as 0 (allowed) or infinity.
  std::vector<std::vector<size_t>> incident_;  // Per node, its edges in graph_.
  const MemoryBudget& memory_;
  const EliminationPlan& plan_;
  uint64_t perSearch_;
  StepBudget* steps_;
  Clock::time_point deadline_;
  std::function<bool()> stopWhen_;

  // The search in progress: minimising, or looking for anything within cap_.
  bool findMode_ = false;
  double cap_ = kInfinity;
  std::optional<std::vector<int>> best_;
  double upper_ = kInfinity;
  bool exact_ = true;
  bool complete_ = true;
  double rootLambda_ = 0.0;
};

}  // namespace meshflow::passes::sharding
