// Sharding strategies of the ops of a forward graph on a 2-D logical mesh: for one
// op, every way to split its work, with the specs of its inputs and outputs, the
// communication the op itself needs (forward and backward), and how many devices
// share its work. One file per op family (MatMul.cpp, Elementwise.cpp, …), in the
// manner of XLA's spmd/dot_handler.cc; strategiesFor dispatches on the op kind.
//
// Most families are written as "loop nests" (Einsum.h): each loop of the op's
// iteration space appears in some inputs and maybe in the output; assigning mesh
// axes to loops gives the specs, and a loop missing from a tensor tells which
// collective it needs (a loop missing from the output is contracted, so the output
// is a partial sum to all-reduce; a loop missing from an input makes that input's
// gradient a partial sum, the weight-gradient all-reduce of data parallelism).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "ir/OpCost.h"
#include "ir/Sharding.h"

namespace meshflow::passes {

struct Strategy {
  /// Alpa/XLA style: `output = in0 x in1` in spec strings, e.g. `S0R = S0S1 x S1R`,
  /// followed by the collectives it needs in brackets.
  std::string name;
  std::vector<ir::ShardingSpec> inputs;   ///< One per op input.
  std::vector<ir::ShardingSpec> outputs;  ///< One per op output.
  /// Seconds of the op's own collectives: forward (e.g. the all-reduce of a
  /// contracted split) and backward (input gradients that are partial sums,
  /// parameters' gradient synchronisation).
  double communication = 0;
  /// Seconds of the parameters' gradient synchronisation alone, unweighted (once
  /// per step); `communication` holds it times StrategyOptions::parameterSyncWeight.
  double parameterSync = 0;
  /// Devices that share the op's work (1 = every device does all of it).
  std::int64_t parallelism = 1;
  /// Mesh axes over which each input's gradient is synchronised (reduced) by
  /// this strategy: for a parameter, the data-parallel group of its gradient.
  std::vector<ir::MeshAxes> gradientSync;
};

struct StrategyOptions {
  /// ZeRO-like: a parameter's gradient synchronisation is a reduce-scatter (and
  /// an all-gather of the updated shard) instead of an all-reduce, so gradients
  /// and optimizer state are kept sharded over the synchronising group.
  bool shardOptimizerState = false;
  /// The weight of parameters' gradient synchronisation in `communication`: 1
  /// when one solve prices a whole step, 1/B when it prices one of B
  /// microbatches (the synchronisation happens once per step).
  double parameterSyncWeight = 1;
};

/// What a family needs to know about an op: the graph, the op, the bound batch,
/// the mesh, and which of the op's inputs need a gradient (only those pay for
/// backward collectives).
struct OpContext {
  const ir::Graph& graph;
  ir::OpId id;
  std::int64_t batch;
  const ir::LogicalMesh& mesh;
  std::vector<bool> inputNeedsGradient;
  StrategyOptions options;

  const ir::Op& op() const { return graph.op(id); }
  /// Concrete shape of the op's input / output `i`.
  std::vector<std::int64_t> inputShape(std::size_t i) const;
  std::vector<std::int64_t> outputShape(std::size_t i) const;
  double inputBytesPerElement(std::size_t i) const;
  double outputBytesPerElement(std::size_t i) const;
};

/// Every strategy of the op (at least one), deduplicated by specs, in a fixed order.
std::vector<Strategy> strategiesFor(const OpContext& ctx);

// Families (one file each).
std::vector<Strategy> matmulStrategies(const OpContext& ctx);
std::vector<Strategy> elementwiseStrategies(const OpContext& ctx);
std::vector<Strategy> reductionStrategies(const OpContext& ctx);
std::vector<Strategy> embeddingStrategies(const OpContext& ctx);
std::vector<Strategy> crossEntropyStrategies(const OpContext& ctx);
std::vector<Strategy> layoutStrategies(const OpContext& ctx);
std::vector<Strategy> attentionStrategies(const OpContext& ctx);
/// Mixture-of-experts dispatch, combine and dropped count (Moe.cpp), with the
/// expert-parallel strategies and their all-to-all.
std::vector<Strategy> moeStrategies(const OpContext& ctx);
/// Input and Parameter ops: every valid spec of their value (a parameter's spec
/// is how its weight, gradient and optimizer state are stored).
std::vector<Strategy> leafStrategies(const OpContext& ctx);
/// Anything else: every tensor replicated, the work done by every device.
std::vector<Strategy> replicatedStrategy(const OpContext& ctx);

}  // namespace meshflow::passes
