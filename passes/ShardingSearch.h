// Internal to solveSharding: the residual problem (what elimination could not
// fold away) and its depth-first branch and bound.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "passes/ShardingElimination.h"

namespace meshflow::passes::sharding {

using Clock = std::chrono::steady_clock;

/// No deadline: a search limited by its steps alone.
inline constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

struct Residual {
  struct Edge {
    int a = 0;  ///< Residual indices, a < b; the matrix is [strategy of a][of b].
    int b = 0;
    Matrix cost;
  };
  std::vector<int> nodes;                   ///< Original indices, increasing.
  std::vector<std::vector<double>> cost;    ///< Per residual node.
  std::vector<std::vector<double>> memory;  ///< Per residual node; empty when constant.
  std::vector<Edge> edges;
  bool memoryActive = false;
  double budget = 0.0;    ///< What the residual nodes with memory may use.
  double constant = 0.0;  ///< The folded part's share of every objective.
};

/// The residual of a replayed plan, without memory (the caller fills it in when
/// the residual carries the budget).
Residual buildResidual(const EliminationPlan& plan, const Folded& folded);

struct SearchOutcome {
  std::optional<std::vector<int>> choice;  ///< Per residual node.
  double value = kInfinity;                ///< Its objective, without the constant.
  bool complete = true;  ///< False when the step limit or the deadline ran out.
  uint64_t visits = 0;
};

/// Depth-first branch and bound over the residual nodes in order, strategies in
/// increasing order. Finds the least objective (without the constant) no greater
/// than `cap`, and among equal ones the lexicographically smallest; with
/// `firstWithinCap`, stops at the first choice within the cap (the
/// lexicographically smallest within it). Gives up after `maxVisits` steps or
/// at `deadline` (the clock is read every kClockStride steps), keeping the best
/// choice found so far.
SearchOutcome searchResidual(const Residual& residual, uint64_t maxVisits, double cap = kInfinity,
                             bool firstWithinCap = false, Clock::time_point deadline = kNoDeadline);

/// How often (in search steps) a search reads the clock: a step is a few
/// nanoseconds to a microsecond, so a deadline is seen within a millisecond.
inline constexpr uint64_t kClockStride = 1024;

/// The exact unconstrained solve of a graph by a plan without kept nodes: fold,
/// search the residual, back-substitute.
struct ExactOutcome {
  std::optional<std::vector<int>> choice;  ///< Every node; none when infeasible.
  double objective = kInfinity;            ///< As the folded problem sums it.
  bool complete = true;  ///< False when the search ran out of steps or time.
  uint64_t visits = 0;
};
ExactOutcome solveExactly(const EliminationPlan& plan, const CostGraph& graph,
                          std::vector<std::vector<double>> cost, uint64_t maxVisits,
                          double cap = kInfinity, bool firstWithinCap = false,
                          Clock::time_point deadline = kNoDeadline);

/// A budget of search steps shared by many searches, and the wall-clock
/// deadline they all stop at.
class StepBudget {
 public:
  explicit StepBudget(uint64_t steps, Clock::time_point deadline = kNoDeadline)
      : total_(steps), left_(steps), deadline_(deadline) {}
  uint64_t left() const { return left_; }
  Clock::time_point deadline() const { return deadline_; }
  uint64_t used() const { return total_ - left_; }
  bool exhausted() const { return exhausted_; }
  void spend(uint64_t steps, bool complete) {
    left_ -= std::min(left_, steps);
    exhausted_ = exhausted_ || !complete;
  }

 private:
  uint64_t total_;
  uint64_t left_;
  Clock::time_point deadline_;
  bool exhausted_ = false;
};

/// Min-marginals of `cost` on the whole graph (see minMarginals), capped; the
/// residual's come from one enumeration of every residual choice within the cap,
/// drawing on `budget` (and stopping at its deadline). Returns nothing when the
/// budget ran out (the marginals would not be exact).
std::optional<std::vector<std::vector<double>>> exactMarginals(
    const EliminationPlan& plan, const CostGraph& graph, std::vector<std::vector<double>> cost,
    double cap, StepBudget& budget);

}  // namespace meshflow::passes::sharding
