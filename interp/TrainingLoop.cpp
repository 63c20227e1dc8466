#include "interp/TrainingLoop.h"

#include <fmt/format.h>

#include <chrono>
#include <fstream>

#include "interp/Builtins.h"
#include "interp/FileAccess.h"
#include "interp/MemoryReport.h"
#include "runtime/parallel/ParallelTrainer.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::interp {
namespace {

// How far a plan's results may lie from the serial reference's. Adam moves a
// weight by up to lr a step whatever the gradient's size, so rounding in a
// near-zero gradient shows as an absolute difference.
struct Tolerance {
  double loss;  // relative, per step
  double weightRtol, weightAtol;
};

// fp32: summation order only. Half precision: a plan rounds partial results
// (a tensor-parallel matmul's partial sums, the all-reduce that adds them) to
// the half type where the serial reference rounds once, so results differ by a
// few units in the last place of the half type: 2^-11 relative for f16, 2^-8
// for bf16, compounded over the layers and steps.
Tolerance toleranceFor(ir::DType precision) {
  switch (precision) {
    case ir::DType::F16: return {5e-3, 1e-2, 1e-2};
    case ir::DType::BF16: return {2e-2, 2e-2, 2e-2};
    default: return {1e-4, 1e-3, 1e-4};
  }
}

// The loss scale and its counts (good steps in a row, skipped steps).
struct LossScale {
  double scale = 0;
  std::int64_t skipped = 0;
};

std::optional<LossScale> lossScaleOf(const StepRunner& runner) {
  auto scale = runner.stateTensor("loss_scale");
  auto counts = runner.stateTensor("loss_scale.counts");
  if (!scale || !counts) return std::nullopt;
  return LossScale{scale->item(), static_cast<std::int64_t>(counts->f32()[1])};
}

nlohmann::json checkpointInfo(const TrainingLoop& loop, const StepRunner& runner) {
  return {{"model", loop.model}, {"seed", loop.seed},          {"batch", loop.batch},
          {"optimizer", loop.optimizer}, {"plan", runner.describe()}};
}

// The state to start from: the latest checkpoint's, else freshly initialised.
std::int64_t startingState(Evaluator& ev, const TrainingLoop& loop, StepRunner& runner, StepRunner* reference) {
  runtime::TensorMap state;
  std::int64_t first = 1;
  std::optional<runtime::LoadedCheckpoint> loaded;
  if (loop.checkpoint) {
    try {
      loaded = runtime::readLatestCheckpoint(*loop.checkpoint);
    } catch (const runtime::CheckpointError& e) {
      failAt(DiagnosticKind::CheckpointError, fmt::format("cannot resume: {}", e.what()), loop.checkpointSpan);
    }
  }
  if (loaded) {
    if (loaded->info.value("model", "") != loop.model)
      failAt(DiagnosticKind::CheckpointError,
             fmt::format("{} holds a checkpoint of '{}', not of '{}'", loaded->path.string(),
                         loaded->info.value("model", "?"), loop.model),
             loop.checkpointSpan);
    state = std::move(loaded->tensors);
    first = loaded->step + 1;
    ev.write(fmt::format("resuming from {} (step {})\n", loaded->path.string(), loaded->step));
  }
  try {
    if (loaded) {
      runner.setState(state);
      if (reference) reference->setState(state);
    } else {
      // Made where it is held: a runner on other processes has each make its own share.
      runner.initializeState(*loop.graph, loop.seed);
      if (reference) reference->initializeState(*loop.graph, loop.seed);
    }
  } catch (const runtime::ParallelRunError& e) {
    if (!loaded)  // a process that could not make its share
      failAt(DiagnosticKind::TrainingError, fmt::format("training '{}' cannot start: {}", loop.model, e.what()),
             loop.call);
    failAt(DiagnosticKind::CheckpointError, fmt::format("the checkpoint does not fit the model: {}", e.what()),
           loop.checkpointSpan);
  } catch (const runtime::DeviceMemoryError& e) {
    failAt(DiagnosticKind::TrainingError,
           fmt::format("training '{}' cannot start: the parameters and optimizer state do not fit: {}", loop.model,
                       e.what()),
           loop.call);
  }
  return first;
}

void verifyStep(const TrainingLoop& loop, std::int64_t step, double loss, double expected) {
  const double tolerance = toleranceFor(loop.precision).loss;
  if (std::abs(loss - expected) <= tolerance * std::max(1.0, std::abs(expected))) return;
  failAt(DiagnosticKind::VerifyFailed,
         fmt::format("step {}: the plan's loss {:.6f} differs from the serial reference's {:.6f}", step,
                     loss, expected),
         loop.call);
}

void verifyState(const TrainingLoop& loop, const StepRunner& runner, const StepRunner& reference) {
  runtime::TensorMap mine = runner.state(), theirs = reference.state();
  Tolerance tolerance = toleranceFor(loop.precision);
  for (const auto& [name, tensor] : theirs) {
    auto it = mine.find(name);
    if (it != mine.end() && runtime::allClose(it->second, tensor, tolerance.weightRtol, tolerance.weightAtol))
      continue;
    failAt(DiagnosticKind::VerifyFailed,
           it == mine.end() ? fmt::format("the plan's state has no `{}`", name)
                            : fmt::format("`{}` differs from the serial reference by up to {:.3g}", name,
                                          runtime::maxAbsDiff(it->second, tensor)),
           loop.call);
  }
}

void saveCheckpoint(Evaluator& ev, const TrainingLoop& loop, StepRunner& runner, std::int64_t step) {
  try {
    runner.saveCheckpoint(*loop.checkpoint, step, checkpointInfo(loop, runner));
  } catch (const std::exception& e) {
    failAt(DiagnosticKind::CheckpointError, fmt::format("cannot write the checkpoint of step {}: {}", step, e.what()),
           loop.checkpointSpan);
  }
  if (loop.logEvery > 0) ev.write(fmt::format("checkpoint: step {} in {}\n", step, loop.checkpoint->string()));
}

// The last step as it ran, in p.save_trace's format (a run that resumed past
// its last step ran none and writes nothing).
void writeTrace(const TrainingLoop& loop, const StepRunner& runner) {
  std::optional<nlohmann::json> trace = runner.lastStepTrace();
  if (!trace) return;
  std::ofstream out(*loop.trace, std::ios::binary | std::ios::trunc);
  out << trace->dump() << "\n";
  if (!out)
    failAt(DiagnosticKind::InvalidValue,
           fmt::format("cannot write the trace '{}': {}", loop.trace->string(),
                       whyCannotWrite(*loop.trace)),
           loop.traceSpan);
}

// Whether the model routes tokens to experts (its drops are then reported).
bool hasMoe(const ir::Graph& graph) {
  for (const ir::Op& op : graph.ops())
    if (op.kind == ir::OpKind::MoeDispatch) return true;
  return false;
}

std::string progressLine(const TrainingLoop& loop, std::int64_t step, double loss, double seconds,
                         std::optional<double> predicted, const MemoryReport& memory,
                         std::optional<double> moeDropped) {
  std::string line = fmt::format("step {:>4}/{}  loss {:.4f}  {:.0f} {}  {:.1f} ms", step, loop.steps, loss,
                                 static_cast<double>(loop.work) / seconds, loop.unit, seconds * 1e3);
  if (predicted) line += fmt::format(" (simulated {:.3g} ms)", *predicted * 1e3);
  if (moeDropped) line += fmt::format("  {:.0f} dropped", *moeDropped);
  return line + memory.progressText() + "\n";
}

// The line that says a step was skipped: a gradient overflowed the f16 range
// under the loss scale, so the weights did not move and the scale was halved.
std::string skippedLine(std::int64_t step, const LossScale& now) {
  return fmt::format("step {:>4}: skipped, a gradient overflowed (loss scale now {:.0f})\n", step, now.scale);
}

// Config::onTrainStep, for a host that follows training step by step.
void reportStep(Evaluator& ev, const TrainingLoop& loop, std::int64_t step, double loss, double seconds,
                const std::vector<runtime::MemoryStats>& used) {
  const auto& onStep = ev.state().config.onTrainStep;
  if (!onStep) return;
  double peak = 0;
  for (const runtime::MemoryStats& device : used) peak = std::max(peak, double(device.peak));
  onStep({loop.model, step, loop.steps, loss, seconds, peak});
}

std::string interruptedMessage(const TrainingLoop& loop, std::int64_t step,
                               std::optional<std::int64_t> latest) {
  std::string message =
      fmt::format("training '{}' interrupted before step {} of {}", loop.model, step, loop.steps);
  if (!loop.checkpoint) return message + " (no checkpoint was asked for)";
  if (!latest)
    return message +
           fmt::format("; no checkpoint was written to {} yet", loop.checkpoint->string());
  return message + fmt::format("; the latest checkpoint is step {} in {} (train again to resume)",
                               *latest, loop.checkpoint->string());
}

}  // namespace

Value runTrainingLoop(Evaluator& ev, const TrainingLoop& loop, StepRunner& runner, StepRunner* reference) {
  const std::int64_t first = startingState(ev, loop, runner, reference);
  if (loop.checkpoint && !loop.checkpointDenied.empty())
    failAt(DiagnosticKind::AccessDenied, loop.checkpointDenied, loop.checkpointSpan);
  // Found now rather than at the first save, after the steps before it ran.
  if (loop.checkpoint)
    if (std::string why = whyCannotWriteUnder(*loop.checkpoint); !why.empty())
      failAt(DiagnosticKind::CheckpointError,
             fmt::format("cannot write checkpoints to '{}': {}", loop.checkpoint->string(), why),
             loop.checkpointSpan);
  std::vector<Value> losses, dropped;
  const bool moe = hasMoe(*loop.graph);
  double seconds = 0;
  MemoryReport memory(runner.predictedMemory());
  // (Assigned, not initialised from a conditional: GCC 12 then takes the
  // optional's value for maybe uninitialised.)
  std::optional<LossScale> scale;
  if (loop.lossScaling) scale = lossScaleOf(runner);
  const std::int64_t skippedBefore = scale ? scale->skipped : 0;
  // The latest complete checkpoint: resumed from, or saved by this run.
  std::optional<std::int64_t> latest;
  if (loop.checkpoint && first > 1) latest = first - 1;
  try {
    for (std::int64_t step = first; step <= loop.steps; ++step) {
      // Ctrl-C stops between steps, where the state is whole.
      if (ev.interruptRequested())
        failAt(DiagnosticKind::Interrupted, interruptedMessage(loop, step, latest), loop.call);
      ev.step();
      runtime::TensorMap inputs = loop.data->batch(*loop.graph, loop.batch, step - 1);
      auto start = std::chrono::steady_clock::now();
      double loss = runner.step(inputs, step);
      double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      seconds += elapsed;
      losses.push_back(Value::number(loss));
      std::optional<double> moeDropped;
      if (moe) {
        moeDropped = runner.lastMoeDropped();
        dropped.push_back(Value::integer(static_cast<std::int64_t>(*moeDropped)));
      }
      if (reference) verifyStep(loop, step, loss, reference->step(inputs, step));
      std::vector<runtime::MemoryStats> used = runner.lastMemory();
      if (auto warning = memory.add(step, used)) ev.write(*warning);
      reportStep(ev, loop, step, loss, elapsed, used);
      if (loop.logEvery > 0 && (step % loop.logEvery == 0 || step == first || step == loop.steps))
        ev.write(progressLine(loop, step, loss, elapsed, runner.predictedSeconds(), memory, moeDropped));
      if (scale) {
        std::int64_t skippedSoFar = scale->skipped;
        scale = lossScaleOf(runner);
        // Printed even with log_every = 0: a skipped step changes what the run computed.
        if (scale && scale->skipped > skippedSoFar) ev.write(skippedLine(step, *scale));
      }
      if (loop.checkpoint && ((loop.every > 0 && step % loop.every == 0) || step == loop.steps)) {
        saveCheckpoint(ev, loop, runner, step);
        latest = step;
      }
    }
  } catch (const runtime::DataError& error) {
    failAt(DiagnosticKind::DataError, error.what(), loop.dataSpan);
  } catch (const runtime::ExecutionError& error) {
    failAt(DiagnosticKind::TrainingError, fmt::format("training '{}' failed: {}", loop.model, error.what()),
           loop.call);
  } catch (const runtime::ParallelRunError& error) {
    failAt(DiagnosticKind::TrainingError, fmt::format("training '{}' failed: {}", loop.model, error.what()),
           loop.call);
  }
  if (reference) verifyState(loop, runner, *reference);
  if (loop.trace) writeTrace(loop, runner);
  std::int64_t ran = static_cast<std::int64_t>(losses.size());
  auto predicted = runner.predictedSeconds();
  std::vector<std::pair<std::string, Value>> fields = {
      {"losses", ev.makeList(std::move(losses))},
      {"steps", Value::integer(ran)},
      {"first_step", Value::integer(first)},
      {"seconds", Value::quantity(seconds, Dimension{0, 1, 0})},
      {"throughput", Value::number(seconds > 0 ? static_cast<double>(loop.work * ran) / seconds : 0)},
      {"unit", ev.makeString(loop.unit)},
      {"predicted_step_seconds", predicted ? Value::quantity(*predicted, Dimension{0, 1, 0}) : Value()}};
  memory.addFields(ev, fields);
  // Only a mixture-of-experts model reports its drops, so other records keep their fields.
  if (moe) fields.emplace_back("moe_dropped", ev.makeList(std::move(dropped)));
  // Only a loss-scaled run reports its scaler, so other runs' records keep their fields.
  if (scale) {
    fields.emplace_back("skipped_steps", Value::integer(scale->skipped - skippedBefore));
    fields.emplace_back("loss_scale", Value::number(scale->scale));
  }
  return ev.makeRecord(std::move(fields));
}

}  // namespace meshflow::interp
