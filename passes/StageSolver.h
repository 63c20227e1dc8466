// The inter-operator stage DP (Alpa §5, eq. 2–5) on an explicit cost table.
//
// Given L layers, B microbatches, an N×M cluster, a list of submesh shapes and
// the latency c[i][j][s][g] of a stage that holds layers i..j (inclusive) on
// submesh s with logical-mesh choice g, find the pipeline that minimises
//
//     Σ t_i + (B − 1) · max t_j
//
// where the stages hold consecutive layer ranges covering all L layers in order,
// and their submeshes together take exactly the cluster's N·M devices.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "passes/PlanControl.h"

namespace meshflow::passes {

/// A submesh shape (n, m): n nodes with m devices each. Valid shapes are one
/// node's slice (1, m) with m dividing M, or whole nodes (n, M); the sub-node
/// sizes must divide one another, which is what lets the DP count devices
/// instead of placing them (any multiset of such shapes whose sizes sum to N·M
/// tiles the cluster).
struct SubmeshShape {
  int nodes = 1;
  int devicesPerNode = 1;

  int devices() const { return nodes * devicesPerNode; }
  bool operator==(const SubmeshShape&) const = default;
};

/// The input of the stage DP. `cost` and `maxSuccStages` are dense row-major
/// arrays indexed [i][j][s][g] (see `index`); entries with j < i are ignored.
struct StageProblem {
  static constexpr double kInfeasible = std::numeric_limits<double>::infinity();
  static constexpr int kUnlimited = std::numeric_limits<int>::max();

  int layers = 0;          // L
  int microbatches = 1;    // B
  int nodes = 1;           // N
  int devicesPerNode = 1;  // M
  std::vector<SubmeshShape> submeshes;
  int configs = 1;  // G, the logical-mesh choices per submesh
  /// Stage latency; kInfeasible where the stage cannot run (e.g. out of memory).
  std::vector<double> cost;
  /// The most stages allowed after this one (a memory bound under the
  /// schedule); empty means unlimited everywhere. Negative forbids the stage.
  std::vector<int> maxSuccStages;
  /// 0: the exact optimum. When positive, the t_max enumeration tries only
  /// enough caps that every candidate t_max has a tried cap within this
  /// relative distance above it, so the result costs at most (1 + gap) times
  /// the optimum (for large problems, where every distinct latency is a DP run).
  double tmaxGap = 0;

  /// An L×L×S×G problem with every stage infeasible and no stage limits.
  static StageProblem make(int layers, int microbatches, int nodes, int devicesPerNode,
                           std::vector<SubmeshShape> submeshes, int configs);

  std::size_t index(int i, int j, int s, int g) const {
    return ((static_cast<std::size_t>(i) * layers + j) * submeshes.size() + s) * configs + g;
  }
  std::size_t tableSize() const { return index(layers, 0, 0, 0); }
  double& at(int i, int j, int s, int g) { return cost[index(i, j, s, g)]; }
  double at(int i, int j, int s, int g) const { return cost[index(i, j, s, g)]; }
};

/// One pipeline stage: layers [firstLayer, endLayer) on submesh `submesh` with
/// logical-mesh choice `config`.
struct Stage {
  int firstLayer = 0;
  int endLayer = 0;
  int submesh = 0;
  int config = 0;
  double latency = 0;

  bool operator==(const Stage&) const = default;
};

struct StageSolution {
  double cost = 0;            // Σ t_i + (B − 1) · max t_j
  double latencySum = 0;      // Σ t_i
  double maxLatency = 0;      // max t_j
  std::vector<Stage> stages;  // in layer order
  // How much work the search did, for benchmarks and `explain`.
  std::int64_t distinctCosts = 0;  // candidate values of t_max
  std::int64_t dpRuns = 0;         // DP passes run (t_max values tried)
  /// False when the time budget ran out before the t_max enumeration ended:
  /// the best plan found, not proven optimal.
  bool optimal = true;
};

struct StageSolveOptions {
  /// Seconds the t_max enumeration may take; once spent, the best plan found
  /// so far is the answer (optimal = false). The first DP run, which finds a
  /// plan whenever one exists, always completes. Empty: no limit.
  std::optional<double> timeBudgetSeconds{};
  /// The planner's control (passes/PlanControl.h): each DP run is a safe
  /// point, where cancellation or the planner's own deadline stops the solve.
  PlanControl* control = nullptr;
};

/// A user error in a stage problem: malformed input or no feasible plan.
class StageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Checks sizes, ranges and submesh shapes; throws StageError naming the field
/// (e.g. "submeshes[2]: ...").
void validateStageProblem(const StageProblem& problem);

/// Solves the stage DP exactly. Among plans of equal cost the result is
/// deterministic. Throws StageError on invalid input or when no plan is
/// feasible ("no feasible plan: ..."), PlanInterrupted when `options.control`
/// stops it.
StageSolution solveStages(const StageProblem& problem, const StageSolveOptions& options = {});

}  // namespace meshflow::passes
