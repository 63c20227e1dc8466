// Activation recomputation: what a stage's forward keeps for its backward, and
// what a RUN R reruns before the backward to rebuild the rest (ir/Program.h).
//
// "full" keeps only what enters the stage (the values carried in from earlier
// stages that the rerun or the backward reads) and reruns the forward ops its
// stash needs; "selective" keeps everything but the s × s attention scores
// (Megatron's selective recomputation) and reruns only the ops that make them.
// Graph inputs and parameters are bound again from the microbatch and the
// state, so they are never kept. Random ops (dropout) draw from a counter-based
// generator keyed by seed, op, step and element, so a rerun replays their masks.
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
  /// What the forward keeps instead of the piece's stash (sorted).
  std::vector<ir::ValueId> kept;
  /// The forward ops RUN R reruns, in graph order (empty: nothing to rebuild).
  std::vector<ir::OpId> rerun;
  /// The stash values the rerun rebuilds (sorted): stash = kept ∪ rebuilt,
  /// less any kept value the backward does not read.
  std::vector<ir::ValueId> rebuilt;
};

/// How stage `piece` of a training graph recomputes under `mode`; with
/// kNone, `kept` is the stash and nothing is rerun.
StageRecomputation planRecomputation(const ir::Graph& training, const StagePiece& piece,
                                     Recompute mode);

}  // namespace meshflow::passes
