// runtime::ProcessTrainer — the controller's side of a plan run over the
// processes of a job (the mpi backend): it sends every worker the job once
// (runtime/distributed/TrainingJob.h), runs its own device (device 0) with a
// ParallelTrainer whose DeviceHost runs only that device, and for each
// command the loop gives (a step, the state, a checkpoint) tells the workers
// what to do and gathers what they answer (docs/distributed.md).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/distributed/ProcessGroup.h"
#include "runtime/distributed/TrainingJob.h"

namespace meshflow::runtime {

class ProcessTrainer {
 public:
  /// Sends the job to every worker and builds this process's part. Throws
  /// ParallelRunError when the job's devices are not the group's processes
  /// (naming both counts) or a worker cannot take the job (its message).
  ProcessTrainer(ProcessGroup& group, TrainingJob job);
  /// Tells the workers the job is over.
  ~ProcessTrainer();
  ProcessTrainer(const ProcessTrainer&) = delete;
  ProcessTrainer& operator=(const ProcessTrainer&) = delete;

  /// One step on every process; each worker reads its own batch from the
  /// job's data. The loss and every device's times and memory, gathered.
  /// A failure anywhere is a ParallelRunError naming the first failed
  /// device, step and instruction.
  ParallelStepResult step(const TensorMap& batch, std::int64_t step);
  /// Hands every worker its share of `state`: the whole state goes to each.
  void setState(const TensorMap& state);
  /// The initial state of the training graph for `seed` (what
  /// initializeParameters makes), each process making only its own device's
  /// share: the controller sends the seed, not the tensors.
  void initializeState(std::uint64_t seed);
  /// The whole state, gathered from the devices that hold it.
  TensorMap state();
  std::optional<Tensor> replicatedState(const std::string& name);
  /// Every process writes its device's shard file into the checkpoint in
  /// parallel; the controller commits it (meta.json, then `latest`) only
  /// after every one has written and synced its part.
  void saveCheckpoint(const std::filesystem::path& dir, std::int64_t step, const nlohmann::json& info, int keep = 2);

  const ir::Program& program() const { return trainer_->program(); }
  int replicas() const { return trainer_->replicas(); }

 private:
  /// Sends `command` to every worker, then (after `local`, this process's
  /// part) gathers their replies, waiting at most the job's timeout for
  /// each; throws ParallelRunError with the first failure that is not an
  /// abort (this process's or a worker's), led by the ranks that did not
  /// answer. After a failure every command throws.
  std::vector<nlohmann::json> everywhere(const nlohmann::json& command, const std::function<void()>& local);
  std::vector<int> workers() const;

  ProcessGroup& group_;
  TrainingJob job_;
  std::unique_ptr<ParallelTrainer> trainer_;
  bool broken_ = false;  // a command failed: the workers' state is unknown
};

}  // namespace meshflow::runtime
