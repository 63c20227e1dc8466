// What train() steps: the serial reference on one device, or a plan on the cpu
// backend's virtual cluster — one interface, so the loop around them (data,
// progress, verification, checkpoints) is written once (interp/TrainingLoop.h).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "passes/Autodiff.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/ProcessGroup.h"
#include "runtime/distributed/TrainingJob.h"
#include "runtime/parallel/DeviceHost.h"
#include "runtime/parallel/ParallelTrainer.h"
#include "runtime/reference/SerialExecutor.h"
#include "runtime/sim/Simulator.h"

namespace meshflow::interp {

class StepRunner {
 public:
  virtual ~StepRunner() = default;
  /// Runs training step `step` (1-based) on the whole batch; returns the loss.
  virtual double step(const runtime::TensorMap& batch, std::int64_t step) = 0;
  virtual runtime::TensorMap state() const = 0;
  /// One replicated state tensor (the loss scale), cheaper than state().
  virtual std::optional<runtime::Tensor> stateTensor(const std::string& name) const = 0;
  virtual void setState(const runtime::TensorMap& state) = 0;
  /// Sets the initial state of `graph` (the training graph) for `seed`, as
  /// runtime::initializeParameters makes it. A runner whose devices live in
  /// other processes has each make its own share instead of sending it.
  virtual void initializeState(const ir::Graph& graph, std::uint64_t seed) {
    runtime::TensorMap state;
    runtime::initializeParameters(graph, seed, state);
    setState(state);
  }
  /// Writes the state as checkpoint `step` in `dir` (runtime/checkpoint/Checkpoint.h).
  virtual void saveCheckpoint(const std::filesystem::path& dir, std::int64_t step, const nlohmann::json& info) = 0;
  /// True for a plan on the parallel runtime, false for the serial reference.
  virtual bool parallel() const = 0;
  /// Seconds the simulator predicts for a step, when there is a plan.
  virtual std::optional<double> predictedSeconds() const { return std::nullopt; }
  /// Per device: what the last step's tensors held, measured (empty for the
  /// serial reference), and the plan's predicted peak bytes.
  virtual std::vector<runtime::MemoryStats> lastMemory() const { return {}; }
  virtual std::vector<double> predictedMemory() const { return {}; }
  /// The (token, expert) choices the last step's moe_dispatch ops dropped
  /// past their experts' capacity, over the whole batch.
  virtual double lastMoeDropped() const = 0;
  /// The last step as it ran on the plan's devices, as a Chrome trace in the
  /// format of p.save_trace (runtime/sim/SimTrace.h); none for the serial
  /// reference or before a step.
  virtual std::optional<nlohmann::json> lastStepTrace() const { return std::nullopt; }
  /// One line: "serial reference on 1 device" or the plan's shape.
  virtual std::string describe() const = 0;
};

std::unique_ptr<StepRunner> serialRunner(const passes::TrainingGraph& training, std::int64_t batch);

/// A plan on the cpu backend (or on `host`'s devices: the cuda backend's,
/// runtime/GpuHosts.h); with `simulator`, its Program is also simulated once
/// so progress lines can show the predicted step time. `predictedMemory`:
/// the plan's peak bytes per device.
std::unique_ptr<StepRunner> parallelRunner(const passes::TrainingGraph& training, runtime::ParallelPlan plan,
                                           runtime::ParallelOptions options,
                                           std::optional<runtime::sim::SimulatorOptions> simulator,
                                           std::string description, std::vector<double> predictedMemory,
                                           std::unique_ptr<runtime::DeviceHost> host = nullptr);

/// A plan run by the processes of `group` (the mpi backend), this process
/// their controller: the same as parallelRunner, the devices in processes.
std::unique_ptr<StepRunner> processRunner(runtime::ProcessGroup& group, runtime::TrainingJob job,
                                          std::optional<runtime::sim::SimulatorOptions> simulator,
                                          std::string description, std::vector<double> predictedMemory);

}  // namespace meshflow::interp
