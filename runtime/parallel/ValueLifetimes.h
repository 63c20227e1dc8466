// How long the values of one RUN live: what a RUN hands on to later
// instructions, and, after each of its ops, what no later op of it reads, so
// the executor frees each value at its last use instead of at the RUN's end.
#pragma once

#include <array>
#include <span>
#include <vector>

#include "ir/Graph.h"
#include "ir/PipelineSchedule.h"
#include "passes/Recomputation.h"
#include "passes/StagePartition.h"

namespace meshflow::runtime {

/// What a RUN of `action` on virtual stage `vs` leaves behind, sorted:
///   F  the forward carry, what the forward keeps (the stash, or with
///      recomputation the part R rebuilds from) and, on the loss stage, the loss;
///   R  the whole stash and the checkpoints the layers still to rerun read;
///   B  the backward carry and the weight gradients;
///   I  those, the stash and what W reads of I's results;
///   W  the weight gradients.
std::vector<ir::ValueId> handedOn(const passes::StagePartition& partition,
                                  const passes::StageRecomputation& recomputation, int vs,
                                  ir::ActionKind action);

/// The ops a RUN of `action` runs on a stage: its forward, its backward (B, I
/// or W) — with recomputation, with each layer's rerun before the backward
/// reads it (passes/Recomputation.h) — or for R the layer rerun first.
const std::vector<ir::OpId>& opsOfRun(const passes::StagePiece& piece,
                                      const passes::StageRecomputation& recomputation, ir::ActionKind action);

/// For each op of a RUN (by position in `ops`): the values to drop after it —
/// its inputs that no later op of the RUN reads and its outputs that none
/// reads, unless `keep` (sorted) holds them.
struct ReleasePlan {
  std::vector<std::vector<ir::ValueId>> after;
};
ReleasePlan planReleases(const ir::Graph& graph, std::span<const ir::OpId> ops,
                         const std::vector<ir::ValueId>& keep);

/// A virtual stage's release plans, one per RUN kind (by ActionKind: F, B, I, W, R).
using StageReleases = std::array<ReleasePlan, 5>;
std::vector<StageReleases> planStageReleases(
    const ir::Graph& graph, const passes::StagePartition& partition,
    const std::vector<passes::StageRecomputation>& recomputation);

}  // namespace meshflow::runtime
