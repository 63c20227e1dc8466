// Autodiff: turns a traced forward graph into the training graph that one
// optimizer step runs — the forward ops, their backward ops (reverse-mode, one
// VJP rule per forward OpKind of ir/Graph.h) and the optimizer update.
// docs/autodiff.md has the VJP table and the update semantics.
#pragma once

#include <stdexcept>
#include <vector>

#include "ir/Graph.h"
#include "passes/OptimizerConfig.h"

namespace meshflow::passes {

/// The forward graph cannot be differentiated: its output is not one f32
/// scalar, it holds an op with no VJP rule, or the optimizer is malformed.
/// The message names the op or value at fault.
class AutodiffError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One value an executor writes back after a step: `updated` (an output of the
/// training graph) replaces the leaf `target` (a model parameter or an
/// optimizer-state leaf) for the next step.
struct WriteBack {
  ir::ValueId updated;
  ir::ValueId target;
  friend bool operator==(const WriteBack&, const WriteBack&) = default;
};

struct TrainingGraph {
  /// Ops in three runs, in order: the forward graph unchanged (same op and
  /// value ids), then Phase::Backward ops, then Phase::Update ops.
  ///
  /// Optimizer state lives in Parameter ops of the update run: phase Update,
  /// forwardOp = the model parameter's op, `init = "zeros"` and
  /// `name = "<param>.momentum"` (sgd) or `"<param>.adam_m"`, `"<param>.adam_v"`
  /// (adam, adamw). So Graph::parameters() lists them too; the model's
  /// parameters are the Parameter ops of phase Forward.
  ///
  /// Mixed precision: a parameter of dtype f16 or bf16 is the compute copy of
  /// an fp32 master weight, the update-phase leaf `<param>.master` (init like
  /// the parameter, `init_name = "<param>"`). Its gradient is cast to f32 at
  /// the end of the backward (phase Backward: that f32 value is what
  /// microbatches accumulate), the optimizer (with fp32 state) updates the
  /// master, and an update-phase Cast of the new master (forwardOp = the
  /// parameter's op) replaces the half parameter.
  ///
  /// `graph.outputs` = [loss, updated parameters (in parameter order),
  /// updated state (per parameter in the same order: momentum, or m then v)].
  ir::Graph graph;
  /// One entry per output after the loss, in output order. The same mapping is
  /// in the graph: output j of an SgdUpdate/AdamUpdate op replaces its input
  /// 0 (w), 3 (m) or 4 (v).
  std::vector<WriteBack> writeBacks;
};

/// Builds the training graph of `forward`, whose single output must be an f32
/// scalar loss. Pure: the same inputs always give an identical graph.
TrainingGraph buildTrainingGraph(const ir::Graph& forward, const OptimizerConfig& optimizer);

}  // namespace meshflow::passes
