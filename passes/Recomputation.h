// Activation recomputation: what a stage's forward keeps for its backward, and
// how the backward rebuilds the rest, one layer at a time (ir/Program.h).
//
// "full" keeps what enters each layer of the stage (its checkpoints: values
// made by another layer of the stage, or carried in from earlier stages, that
// the layer's forward reads) and reruns each layer's forward just before the
// backward reads what it made, as Megatron-LM checkpoints at every layer;
// "selective" keeps everything but the s × s attention scores (Megatron's
// selective recomputation) and reruns, layer by layer, only the ops that make
// them. So a recomputing backward holds one layer's rebuilt activations at a
// time, not the stage's. Graph inputs and parameters are bound again from the
// microbatch and the state, so they are never kept. Random ops (dropout) draw
// from a counter-based generator keyed by seed, op, step and element, so a
// rerun replays their masks.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "ir/Graph.h"
#include "passes/StagePartition.h"

namespace meshflow::passes {

enum class Recompute { kNone, kSelective, kFull };

/// "none", "selective", "full".
const char* recomputeName(Recompute r);
std::optional<Recompute> parseRecompute(std::string_view name);

/// The ops of the s × s attention scores ([b, heads, s, s]) that selective
/// recomputation drops: softmax, causal mask, scale and dropout of a square
/// last-two-dims 4-D value.
bool isAttentionScore(const ir::Graph& graph, const ir::Op& op);

struct StageRecomputation {
  /// What the forward keeps instead of the piece's stash (sorted): the stash
  /// values it does not drop and the layers' checkpoints.
  std::vector<ir::ValueId> kept;
  /// The stash values the reruns rebuild (sorted): stash = kept ∪ rebuilt,
  /// less any kept value the backward does not read.
  std::vector<ir::ValueId> rebuilt;
  /// Per layer that rebuilds something: its forward ops to rerun, in graph
  /// order (empty: nothing to rebuild).
  std::vector<std::vector<ir::OpId>> layers;
  /// The ops of RUN R: the layer the backward needs first, rerun ahead of it.
  std::vector<ir::OpId> rerun;
  /// The ops of a recomputing B and I: the piece's backward (or its I part)
  /// with each other layer's rerun inserted right before the first op that
  /// reads what the layer rebuilds. I ends with the layers it did not need,
  /// since W reads them. Empty without recomputation.
  std::vector<ir::OpId> backward;
  std::vector<ir::OpId> inputGrad;
};

/// How stage `piece` of a training graph recomputes under `mode`; with
/// kNone, `kept` is the stash and nothing is rerun. `layerOfOp` gives each
/// forward op's layer (by op id); empty, or an op past its end: the whole stage
/// is one layer.
StageRecomputation planRecomputation(const ir::Graph& training, const StagePiece& piece,
                                     Recompute mode, const std::vector<int>& layerOfOp = {});

}  // namespace meshflow::passes
