// The intra-operator sharding pass (Alpa §4) on a forward graph: for one stage on
// one logical mesh, choose a strategy for every op (passes/strategies/) so that
// communication + resharding + the compute lost to replicated work is least,
// under an optional per-device memory budget, and explain every choice.
//
// The problem handed to solveSharding has one node per op (leaves included: a
// parameter's strategy is how its weight, gradient and optimizer state are
// stored) and one edge per use of a value. Node cost: the strategy's own
// collectives (forward and backward) plus its compute penalty, the time its
// share of the work takes beyond a perfect split over every device
// (opComputeTime(parallelism) − opComputeTime(all devices)). Edge cost: resharding
// the value from the producer's output spec to the consumer's input spec, plus
// resharding its gradient back when the value needs one. Memory: parameters'
// weights, gradients and optimizer state, and activations held for backward.
//
// An Input op with the attribute `requires_grad` (a value another stage
// produced, cut out by the planner) needs a gradient like a parameter's output.
//
// Repeated layers (ops whose scope starts with the same name and a number,
// `block0` … `block47`, with identical op sequences) are solved once: every copy
// of an op is tied to its representative, node costs and memory are multiplied
// by the number of copies and edges between (or into) copies are summed. This
// quotient is exact for the problem where all copies choose alike.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "passes/CostModel.h"
#include "passes/ShardingSolver.h"

namespace meshflow::passes {

struct IntraOpPin {
  std::string pattern;
  ir::ShardingSpec spec;
};

struct IntraOpOptions {
  /// The (micro)batch size bound to the graph's `batch` dims.
  std::int64_t batch = 1;
  /// ZeRO-like parameter gradients: reduce-scatter + all-gather, gradients and
  /// optimizer state sharded over the data-parallel group.
  bool shardOptimizerState = false;
  /// Memory model (optimizer copies, microbatches held); shardOptimizerState
  /// above overrides memory.shardOptimizerState.
  MemoryOptions memory;
  /// Per-device bytes the stage may use (weights, gradients, optimizer state,
  /// activations); none means unbounded.
  std::optional<double> memoryBudget;
  /// Solve one representative of identical repeated layers.
  bool mergeRepeatedLayers = true;
  /// Seconds per byte of per-device memory added to each strategy's cost: 0
  /// ignores memory; larger values trade communication for leaner strategies
  /// (the planner's memory-lean solves). The result's `objective` includes it.
  double memoryWeight = 0;
  /// Weight of parameters' gradient synchronisation in the objective (1/B when
  /// the solve prices one of B microbatches; see StrategyOptions).
  double parameterSyncWeight = 1;
  /// Pinned output specs: ops whose scope matches `pattern` (glob, `*` matches any
  /// run of characters) and whose first output has the spec's rank keep only the
  /// strategies producing `spec`. A pin no strategy of a matching op meets is an
  /// IntraOpError naming the pin and the op.
  std::vector<IntraOpPin> pins;
  /// When set, receives the sharding problem as it is posed to the solver
  /// (bench_sharding_solver compares solvers on the planner's own problems).
  ShardingProblem* problemOut = nullptr;
  SolveOptions solver;
};

struct StrategyAlternative {
  std::string name;
  double nodeCost = 0;   ///< Communication + compute penalty of this op alone.
  double objective = 0;  ///< Whole objective with this alternative (copies alike).
};

struct OpSharding {
  ir::OpId op = 0;
  std::string strategy;  ///< Name of the chosen strategy.
  std::vector<ir::ShardingSpec> inputs;
  std::vector<ir::ShardingSpec> outputs;
  double communication = 0;   ///< Seconds of the op's own collectives (unweighted).
  double parameterSync = 0;   ///< The part of it that synchronises parameter gradients.
  double computeTime = 0;     ///< Forward + backward seconds of its share of the work.
  double computePenalty = 0;  ///< computeTime beyond a perfect split.
  std::int64_t parallelism = 1;
  ir::OpId representative = 0;  ///< The op whose choice this one copies (itself if none).
  std::vector<StrategyAlternative> alternatives;  ///< Index = strategy index.
  int chosen = 0;
};

struct IntraOpResult {
  std::vector<OpSharding> ops;  ///< One per op of the graph, in op order.
  double objective = 0;         ///< communication + resharding + computePenalty.
  double communication = 0;     ///< Σ ops' own collectives (parameter sync unweighted).
  double parameterSync = 0;     ///< The part of it that synchronises parameter gradients.
  /// Bytes per device of parameter gradients the chosen strategies leave as
  /// partial sums, by the mesh axes they are summed over (index: MeshAxes k0,
  /// k1, k01; [0] unused): what gradient synchronisation moves once per step.
  std::array<double, 4> gradientSyncBytes{};
  double resharding = 0;        ///< Σ edges.
  double computePenalty = 0;
  double computeTime = 0;       ///< Σ ops' compute time per device.
  bool optimal = true;
  double lowerBound = 0;        ///< Proven lower bound on the objective (= it when optimal).
  MemoryBreakdown memory;       ///< Per device, for the chosen strategies.
  // Problem sizes, for reports.
  std::size_t graphOps = 0;
  std::size_t problemNodes = 0;
  std::size_t problemEdges = 0;
  std::size_t residualNodes = 0;
  std::size_t strategies = 0;   ///< Σ strategies over problem nodes.
  std::size_t repeatedLayers = 0;  ///< Layer copies tied to a representative.
};

/// An op the pass cannot handle (a backward or update op) or an unbound shape.
class IntraOpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Chooses a strategy for every op of `forward` on `mesh`. Deterministic: the same
/// inputs give the same result. Throws IntraOpError for a graph that is not a
/// forward graph, ShardingError when the memory budget cannot be met.
IntraOpResult solveIntraOp(const ir::Graph& forward, const ir::LogicalMesh& mesh,
                           const ir::DeviceSpec& device, const IntraOpOptions& options);

}  // namespace meshflow::passes
