// Runs a list of ops of a training graph on one virtual device: the local
// kernels behind one RUN or UPDATE instruction of a stage.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "ir/Graph.h"
#include "runtime/Tensor.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::runtime {

/// The values one run of a stage holds, by value id (ordered: messages built
/// from it list their tensors in a fixed order).
using ValueTable = std::map<ir::ValueId, Tensor>;

class OpRunner {
 public:
  /// Binds the symbolic batch of every value of `graph` to `microbatch` samples.
  OpRunner(const ir::Graph& graph, std::int64_t microbatch);

  /// Runs `ops` in order. Each reads its inputs from `values`, else — for
  /// parameters and optimizer state — from `state`, else — for graph inputs —
  /// from `inputs` (both by bindingName), and adds its outputs to `values`.
  /// Throws ExecutionError (SerialExecutor.h) naming the op.
  void run(std::span<const ir::OpId> ops, ValueTable& values, const TensorMap& state,
           const TensorMap& inputs, std::int64_t step) const;

  const ir::Graph& graph() const { return graph_; }
  const Shape& shape(ir::ValueId v) const { return shapes_.at(v); }

 private:
  const Tensor* lookup(ir::OpId reader, ir::ValueId v, const ValueTable& values, const TensorMap& state,
                       const TensorMap& inputs) const;

  const ir::Graph& graph_;
  std::vector<Shape> shapes_;
  std::vector<std::string> names_;  // bindingName of leaves, "" otherwise
};

}  // namespace meshflow::runtime
