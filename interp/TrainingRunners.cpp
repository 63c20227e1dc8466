#include "interp/TrainingRunners.h"

#include "runtime/distributed/ProcessTrainer.h"
#include "runtime/reference/SerialExecutor.h"
#include "runtime/sim/SimTrace.h"

namespace meshflow::interp {
namespace {

// A step as it ran on the plan's devices, in p.save_trace's format.
std::optional<nlohmann::json> measuredTrace(const ir::Program& program,
                                            const std::optional<runtime::ParallelStepResult>& last) {
  if (!last) return std::nullopt;
  runtime::sim::SimulationResult measured;
  measured.makespan = last->seconds;
  measured.timeline.resize(program.devices.size());
  for (std::size_t d = 0; d < last->devices.size() && d < measured.timeline.size(); ++d)
    measured.timeline[d] = last->devices[d].timeline;
  return runtime::sim::simulationTrace(program, measured);
}

class SerialRunner final : public StepRunner {
 public:
  SerialRunner(const passes::TrainingGraph& training, std::int64_t batch)
      : executor_(training.graph, {batch, true}) {}

  double step(const runtime::TensorMap& batch, std::int64_t step) override {
    return executor_.run(batch, state_, step).at(0).item();
  }
  runtime::TensorMap state() const override { return state_; }
  std::optional<runtime::Tensor> stateTensor(const std::string& name) const override {
    auto it = state_.find(name);
    return it == state_.end() ? std::nullopt : std::optional<runtime::Tensor>(it->second);
  }
  void setState(const runtime::TensorMap& state) override { state_ = state; }
  void saveCheckpoint(const std::filesystem::path& dir, std::int64_t step, const nlohmann::json& info) override {
    runtime::writeCheckpoint(dir, step, info, {runtime::wholeTensorShard(0, state_)});
  }
  bool parallel() const override { return false; }
  double lastMoeDropped() const override { return executor_.lastStats().moeDropped; }
  std::string describe() const override { return "the serial reference on 1 device"; }

 private:
  runtime::SerialExecutor executor_;
  runtime::TensorMap state_;
};

// Writes a checkpoint of what `trainer` holds: the cpu backend's devices are
// all here; a ProcessTrainer has every process write its own shards.
void saveTrainerCheckpoint(const runtime::ParallelTrainer& trainer, const std::filesystem::path& dir,
                           std::int64_t step, const nlohmann::json& info) {
  runtime::writeCheckpoint(dir, step, info, trainer.shards());
}
void saveTrainerCheckpoint(runtime::ProcessTrainer& trainer, const std::filesystem::path& dir, std::int64_t step,
                           const nlohmann::json& info) {
  trainer.saveCheckpoint(dir, step, info);
}

// A plan on the parallel runtime: its devices on this process's threads
// (ParallelTrainer) or on the processes of a job (ProcessTrainer, the
// controller's view; each device's trace is timed from when its process
// began the step, the processes beginning within a control message's
// latency of each other).
template <typename Trainer>
class PlanRunner final : public StepRunner {
 public:
  template <typename... TrainerArgs>
  PlanRunner(std::optional<runtime::sim::SimulatorOptions> simulator, std::string description,
             std::vector<double> predictedMemory, TrainerArgs&&... args)
      : trainer_(std::forward<TrainerArgs>(args)...),
        description_(std::move(description)),
        predictedMemory_(std::move(predictedMemory)) {
    if (simulator) predicted_ = runtime::sim::simulate(trainer_.program(), *simulator).makespan;
  }

  double step(const runtime::TensorMap& batch, std::int64_t step) override {
    last_ = trainer_.step(batch, step);
    return last_->loss;
  }
  runtime::TensorMap state() const override { return trainer_.state(); }
  std::optional<runtime::Tensor> stateTensor(const std::string& name) const override {
    return trainer_.replicatedState(name);
  }
  void setState(const runtime::TensorMap& state) override { trainer_.setState(state); }
  void initializeState(const ir::Graph& graph, std::uint64_t seed) override {
    if constexpr (requires { trainer_.initializeState(seed); })
      trainer_.initializeState(seed);  // every process makes its own share
    else
      StepRunner::initializeState(graph, seed);
  }
  void saveCheckpoint(const std::filesystem::path& dir, std::int64_t step, const nlohmann::json& info) override {
    saveTrainerCheckpoint(trainer_, dir, step, info);
  }
  bool parallel() const override { return true; }
  std::optional<double> predictedSeconds() const override { return predicted_; }
  std::vector<runtime::MemoryStats> lastMemory() const override {
    return last_ ? last_->memory : std::vector<runtime::MemoryStats>{};
  }
  std::vector<double> predictedMemory() const override { return predictedMemory_; }
  double lastMoeDropped() const override { return last_ ? last_->moeDropped : 0; }
  std::string describe() const override { return description_; }
  std::optional<nlohmann::json> lastStepTrace() const override { return measuredTrace(trainer_.program(), last_); }

 private:
  // A ProcessTrainer gathers the state by asking its workers: that changes
  // nothing a caller sees.
  mutable Trainer trainer_;
  std::optional<runtime::ParallelStepResult> last_;
  std::optional<double> predicted_;
  std::string description_;
  std::vector<double> predictedMemory_;
};

}  // namespace

std::unique_ptr<StepRunner> processRunner(runtime::ProcessGroup& group, runtime::TrainingJob job,
                                          std::optional<runtime::sim::SimulatorOptions> simulator,
                                          std::string description, std::vector<double> predictedMemory) {
  return std::make_unique<PlanRunner<runtime::ProcessTrainer>>(simulator, std::move(description),
                                                               std::move(predictedMemory), group, std::move(job));
}

std::unique_ptr<StepRunner> serialRunner(const passes::TrainingGraph& training, std::int64_t batch) {
  return std::make_unique<SerialRunner>(training, batch);
}

std::unique_ptr<StepRunner> parallelRunner(const passes::TrainingGraph& training, runtime::ParallelPlan plan,
                                           runtime::ParallelOptions options,
                                           std::optional<runtime::sim::SimulatorOptions> simulator,
                                           std::string description, std::vector<double> predictedMemory,
                                           std::unique_ptr<runtime::DeviceHost> host) {
  return std::make_unique<PlanRunner<runtime::ParallelTrainer>>(simulator, std::move(description),
                                                                std::move(predictedMemory), training,
                                                                std::move(plan), options, std::move(host));
}

}  // namespace meshflow::interp
