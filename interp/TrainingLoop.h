// The loop of train(): data, steps, progress lines, verification against the
// serial reference, checkpoints and resuming (docs/training.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "interp/Evaluator.h"
#include "interp/TrainingRunners.h"
#include "runtime/data/DataSource.h"

namespace meshflow::interp {

struct TrainingLoop {
  std::string model;  ///< Its name, recorded in checkpoints.
  const ir::Graph* graph = nullptr;  ///< The training graph (for the data).
  const runtime::DataSource* data = nullptr;
  std::int64_t batch = 1;
  std::int64_t steps = 1;
  std::uint64_t seed = 0;
  std::string optimizer;  ///< "adam", recorded in checkpoints
  std::int64_t logEvery = 1;
  std::optional<std::filesystem::path> checkpoint;  ///< Directory, checked readable.
  std::string checkpointDenied;  ///< Why it may not be written, when it may not.
  std::int64_t every = 0;  ///< Checkpoint every this many steps (0: at the end only).
  /// Where to write the last step's measured Chrome trace (checked writable).
  std::optional<std::filesystem::path> trace;
  /// Work per step for the throughput figure ("tokens/s" or "samples/s").
  std::int64_t work = 1;
  std::string unit = "samples/s";
  /// The model's compute precision: f32, or f16/bf16 for mixed precision,
  /// which sets the tolerance of verify = true.
  ir::DType precision = ir::DType::F32;
  /// Whether the training graph scales the loss dynamically (its state
  /// `loss_scale` and `loss_scale.counts`).
  bool lossScaling = false;
  /// Where errors point: the call, the data, checkpoint and trace arguments.
  SourceSpan call, dataSpan, checkpointSpan, traceSpan;
};

/// Runs the loop on `runner`; with `reference`, the serial reference steps
/// alongside and any difference beyond fp32 tolerance is a VerifyFailed error.
/// Resumes from the latest checkpoint in `loop.checkpoint` when there is one.
/// Returns train()'s record: losses (of the steps this call ran), steps,
/// seconds, throughput, unit, first_step and predicted_step_seconds; on a plan
/// peak_memory, predicted_memory and device_memory (interp/MemoryReport.h);
/// with loss scaling also skipped_steps (this call's) and loss_scale (the final);
/// for a mixture-of-experts model moe_dropped (per step, the (token, expert)
/// choices dropped past capacity).
Value runTrainingLoop(Evaluator& ev, const TrainingLoop& loop, StepRunner& runner, StepRunner* reference);

}  // namespace meshflow::interp
