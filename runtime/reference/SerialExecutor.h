// The serial reference executor: runs an ir::Graph — forward-only, or a whole
// training graph with its backward and update ops — op by op on one CPU thread
// with the fp32 kernels of runtime/cpu. Every parallel execution of a plan must
// compute what this computes (DESIGN.md, "The runtime contract").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "runtime/Tensor.h"

namespace meshflow::runtime {

/// Named tensors: graph inputs by name, or parameters and optimizer state by
/// value name. An ordered map, so iterating it is deterministic.
using TensorMap = std::map<std::string, Tensor>;

/// A run (or parameter initialisation) failed at an op: a missing input, an
/// input of the wrong dtype or shape for the bound batch, a kernel refusing its
/// operands, or a non-finite loss. what() names the op index, kind, scope and
/// source location.
class ExecutionError : public std::runtime_error {
 public:
  ExecutionError(const ir::Graph& graph, ir::OpId opIndex, const std::string& message);

  ir::OpId opIndex() const { return opIndex_; }
  ir::OpKind kind() const { return kind_; }
  const std::string& scope() const { return scope_; }
  /// The message without the op prefix.
  const std::string& detail() const { return detail_; }

 private:
  ir::OpId opIndex_;
  ir::OpKind kind_;
  std::string scope_;
  std::string detail_;
};

/// The name a graph input or parameter is bound by: its value name, else its
/// op's `name` attribute.
std::string bindingName(const ir::Graph& graph, ir::ValueId value);

/// Adds to `state` every parameter of `graph` it does not hold yet, initialised
/// from the Parameter op's attributes: `init` "normal" (with `std`), "zeros"
/// (also when `init` is absent, as for optimizer state), "ones" or "full"
/// (with `value`), in the parameter's float dtype. A normal init with
/// `init_name` draws the values of that parameter (a master weight's). A normal
/// parameter draws from std::mt19937_64 seeded by mixing `seed` with a hash of
/// the parameter's name, so its values depend on the name and the seed only —
/// not on the order of parameters in the graph.
void initializeParameters(const ir::Graph& graph, std::uint64_t seed, TensorMap& state);

/// The initial value of one parameter of `graph` by its binding name, the
/// same as initializeParameters gives it: for a process that holds only some
/// parameters (or only shards of them) and makes just those. The returned
/// function keeps a reference to `graph`; it throws std::invalid_argument
/// for a name that is no parameter of the graph.
std::function<Tensor(const std::string& name)> parameterInitializer(const ir::Graph& graph, std::uint64_t seed);

struct ExecutorOptions {
  /// The value of the symbolic `batch` dimension.
  std::int64_t batchSize = 1;
  /// Fail (before any state is written back) when the loss — the first graph
  /// output, if it is an f32 scalar — is NaN or infinite.
  bool checkFiniteLoss = true;
};

struct ExecutionStats {
  /// The most bytes the run's intermediate values held at once (graph inputs and
  /// stored parameters are not counted).
  std::size_t peakIntermediateBytes = 0;
  /// The (token, expert) choices the run's moe_dispatch ops dropped past
  /// their experts' capacity (docs/training.md, "Mixture of experts").
  double moeDropped = 0;
};

class SerialExecutor {
 public:
  /// Checks that every value has a concrete host shape for the batch size and
  /// that ops come in an execution order; throws ExecutionError if not.
  SerialExecutor(const ir::Graph& graph, ExecutorOptions options);

  /// Runs the graph once as training step `step` (1-based; it seeds dropout and
  /// is Adam's t). Inputs are looked up in `inputs` and parameters and optimizer
  /// state in `state`, by bindingName. Each intermediate is freed after its last
  /// use. When the run succeeds, every SgdUpdate / AdamUpdate output is written
  /// back to `state` under the name of the Parameter it updates (w', m', v' to w,
  /// m, v), and the graph outputs are returned in order.
  std::vector<Tensor> run(const TensorMap& inputs, TensorMap& state, std::int64_t step = 1);

  const ExecutionStats& lastStats() const { return stats_; }

 private:
  struct WriteBack {
    ir::ValueId value;
    std::string name;
  };

  void bindLeaf(ir::OpId id, const Tensor* tensor, std::vector<const Tensor*>& views) const;
  void checkLoss(ir::OpId id, const Tensor& loss) const;

  ir::Graph graph_;  // a copy, so the executor does not depend on the caller keeping one
  ExecutorOptions options_;
  std::vector<Shape> shapes_;                        // per value, bound to the batch size
  std::vector<std::vector<ir::ValueId>> freeAfter_;  // per op: values dead after it
  std::vector<WriteBack> writeBacks_;                // update outputs and the state they replace
  ExecutionStats stats_;
};

}  // namespace meshflow::runtime
