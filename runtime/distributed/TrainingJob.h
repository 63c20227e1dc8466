// What a worker process needs to run its device of a plan, and the tensors the
// controller and workers exchange, as bytes (docs/distributed.md). The
// controller plans once; the workers never trace, plan or read the script.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "passes/Autodiff.h"
#include "runtime/Tensor.h"
#include "runtime/data/DataSource.h"
#include "runtime/parallel/ParallelTrainer.h"

namespace meshflow::runtime {

/// Bytes that do not decode to what they should (a corrupt or foreign message).
class JobFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct TrainingJob {
  passes::TrainingGraph training;
  ParallelPlan plan;
  ParallelOptions options;
  DataRecipe data;
  /// Each process's device on a GPU of its machine (a GPU cluster: the cuda
  /// backend's kernels and memory, the job's messages and collectives).
  bool onGpus = false;
};

std::string encodeJob(const TrainingJob& job);
TrainingJob decodeJob(std::string_view bytes);

/// Tensors by name, bit for bit.
std::string encodeTensors(const TensorMap& tensors);
TensorMap decodeTensors(std::string_view bytes);

}  // namespace meshflow::runtime
