// Internal to solveSharding: objectives on the problem as given, single-node
// moves, the explain table, and the local search that backs up a timed-out search.
#pragma once

#include <optional>
#include <vector>

#include "passes/ShardingSolver.h"

namespace meshflow::passes::sharding {

class Evaluator {
 public:
  explicit Evaluator(const ShardingProblem& p);

  /// Σ node cost + Σ edge cost in input order, or +infinity when the choice
  /// exceeds the memory budget (summed in node order, compared exactly).
  double objective(const std::vector<int>& c) const;
  /// The objective with node i switched to strategy k, from the objective
  /// `current` of c, touching only node i's edges.
  double switched(const std::vector<int>& c, double current, size_t i, int k) const;
  /// alternatives[i][k] of ShardingSolution.
  std::vector<std::vector<double>> alternatives(const std::vector<int>& c) const;
  /// Lowers each node's strategy while the objective stays the same (to a
  /// fixpoint): the canonical form of an answer not proven optimal.
  void canonicaliseLocally(std::vector<int>& c) const;
  /// A feasible choice from a greedy and from a least-memory start, each improved
  /// by single-node moves; nothing when neither is feasible.
  std::optional<std::vector<int>> localSearch() const;
  /// Single-node improvements until none helps; a feasible choice stays feasible.
  void improveLocally(std::vector<int>& c) const;

 private:
  bool fits(const std::vector<int>& c) const;
  bool fitsSwitched(const std::vector<int>& c, size_t i, int k) const;
  double local(const std::vector<int>& c, size_t i, int k) const;

  const ShardingProblem& p_;
  std::vector<std::vector<size_t>> incident_;
};

}  // namespace meshflow::passes::sharding
