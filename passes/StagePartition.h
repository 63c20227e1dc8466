// Stage partition: a training graph cut into pipeline stages, the unit the
// parallel runtime executes (docs/runtime.md, "Stages").
//
// Every op of the training graph (passes/Autodiff.h) goes to one virtual stage:
// forward ops to the stage the plan gives them, backward and update ops to the
// stage of the forward op they differentiate or update (Op::forwardOp), a model
// parameter and its optimizer state to the stage that reads it. Inputs and
// constants belong to no stage: every stage binds the data of its microbatch and
// evaluates the constants it reads.
//
// Values that cross stages travel with the pipeline's messages:
// - forward carry k → k+1: forward values made at stage ≤ k and read (by forward
//   or backward ops) at a stage > k, relayed through the stages in between;
// - backward carry k → k−1: backward values made at stage ≥ k and read at a stage
//   < k (and, rarely, forward values a later stage made that an earlier stage's
//   backward reads);
// - the stash of stage k: what stage k's forward leaves for its backward.
//
// Zero-bubble schedules split a stage's backward into I (the ops its backward
// carry needs) and W (the rest: weight gradients); `inputGradOutputs` are the
// values I makes that W reads, kept in the stash between the two.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "passes/Autodiff.h"

namespace meshflow::passes {

/// The graph cannot be cut as asked: a forward op reads a later stage, or a
/// parameter is read by two stages. The message names the op or parameter.
class StagePartitionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The ops and values of one virtual stage. Op lists are in graph order; value
/// lists are sorted by id.
struct StagePiece {
  std::vector<ir::OpId> forward;     ///< Forward ops, including the constants they read.
  std::vector<ir::OpId> backward;    ///< The whole backward (B), in order.
  std::vector<ir::OpId> inputGrad;   ///< The part of `backward` its carry needs (I).
  std::vector<ir::OpId> weightGrad;  ///< The rest of `backward` (W).
  std::vector<ir::OpId> update;      ///< Optimizer ops, including the constants they read.

  std::vector<ir::ValueId> stash;             ///< Forward-time values its backward reads.
  std::vector<ir::ValueId> inputGradOutputs;  ///< Values I makes that W reads.
  std::vector<ir::ValueId> forwardCarry;      ///< Sent to the next stage after F.
  std::vector<ir::ValueId> backwardCarry;     ///< Sent to the previous stage after B or I.

  /// Parameter and optimizer-state leaves (by value) the stage owns, sorted by id.
  std::vector<ir::ValueId> state;
  /// The weight gradients the update reads, in the order backward finishes them
  /// (the last layer's first), with the parameter value each belongs to.
  std::vector<ir::ValueId> gradients;
  std::vector<ir::ValueId> gradientParameters;
  /// Per gradient: made by the I part of the backward (else by W).
  std::vector<bool> gradientFromInputGrad;
};

/// Gradient clipping (clip_norm): GlobalNorm reads the gradients of every stage,
/// so it belongs to none. Each device sums the squares of its own gradients,
/// the sums are all-reduced over the stages of its replica, and ClipScale turns
/// the norm into the scale every update reads.
struct GradientClip {
  ir::OpId globalNorm = 0;
  ir::OpId clipScale = 0;
};

struct StagePartition {
  std::vector<StagePiece> stages;
  std::optional<GradientClip> clip;
  /// Per op of the training graph: its stage, or -1 for inputs and constants.
  std::vector<int> stageOfOp;
  ir::ValueId loss = 0;
  int lossStage = 0;
};

/// Cuts `training` into `stages` virtual stages; `stageOfForwardOp[op]` gives
/// the stage of each compute op of the forward run (entries for Input,
/// Parameter and Constant ops are ignored). Throws StagePartitionError.
StagePartition partitionStages(const TrainingGraph& training, const std::vector<int>& stageOfForwardOp,
                               int stages);

}  // namespace meshflow::passes
