// Runs a list of ops of a training graph on one virtual device: the local
// kernels behind one RUN or UPDATE instruction of a stage.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "ir/Graph.h"
#include "runtime/AttentionGroups.h"
#include "runtime/FusedOps.h"
#include "runtime/Tensor.h"
#include "runtime/parallel/ValueLifetimes.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::runtime {

class KernelBackend;

/// The values one run of a stage holds, by value id (ordered: messages built
/// from it list their tensors in a fixed order).
using ValueTable = std::map<ir::ValueId, Tensor>;

/// Per value of `graph`: the binding name of an Input or Parameter value, ""
/// for every other value (runners keep it, so lookups build no strings).
std::vector<std::string> leafNames(const ir::Graph& graph);

/// The tensor bound to the leaf value `v` (binding name `name`, "" if it is
/// no leaf) read by op `reader`: a parameter or optimizer state from `state`,
/// a graph input from `inputs`, checked against `shape` (the value's shape at
/// the bound batch). Throws ExecutionError naming the reader when it is
/// missing, not a leaf, or of another shape.
const Tensor& boundLeaf(const ir::Graph& graph, ir::OpId reader, ir::ValueId v, const std::string& name,
                        const Shape& shape, const TensorMap& state, const TensorMap& inputs);

/// The KernelContext::elementOffset of op `id` (a Dropout or DropoutGrad whose
/// operand's dimension 0 is the batch) in a microbatch of `microbatch` samples
/// that starts at sample `firstSample` of the step's batch; 0 for other ops.
std::uint64_t dropoutElementOffset(const ir::Graph& graph, ir::OpId id, std::int64_t microbatch,
                                   std::int64_t firstSample);

class OpRunner {
 public:
  /// Binds the symbolic batch of every value of `graph` to `microbatch` samples.
  OpRunner(const ir::Graph& graph, std::int64_t microbatch);

  /// Runs `ops` in order. Each reads its inputs from `values`, else — for
  /// parameters and optimizer state — from `state`, else — for graph inputs —
  /// from `inputs` (both by bindingName), and adds its outputs to `values`;
  /// with `releases`, values are dropped after their last use
  /// (runtime/parallel/ValueLifetimes.h). Throws ExecutionError
  /// (SerialExecutor.h) naming the op.
  /// `firstSample`: where the microbatch starts in the step's batch (dropout
  /// masks follow the whole batch's element indices). With `moeDropped`, adds
  /// the choices each moe_dispatch op drops past capacity (cpu::droppedChoices).
  /// When the thread's backend fuses (KernelBackend::fuses), each group of
  /// findFusedGroups it takes runs as one launch, and the intermediates only
  /// the group reads are never added to `values`.
  void run(std::span<const ir::OpId> ops, ValueTable& values, const TensorMap& state,
           const TensorMap& inputs, std::int64_t step, const ReleasePlan* releases = nullptr,
           std::int64_t firstSample = 0, double* moeDropped = nullptr) const;

  /// Input `v` of op `reader`, found as run() finds it.
  const Tensor& input(ir::OpId reader, ir::ValueId v, const ValueTable& values, const TensorMap& state,
                      const TensorMap& inputs) const;
  /// Runs op `id`'s kernel on `in` into `out` (which may be tensors of `in`
  /// where the kernel allows it, as the optimizer updates do); throws
  /// ExecutionError naming the op.
  void runKernel(ir::OpId id, const std::vector<const Tensor*>& in, std::vector<Tensor*>& out,
                 std::int64_t step, std::int64_t firstSample = 0) const;

  /// From now on runs each of `groups` (findAttentionGroups on this runner's
  /// graph) as a fused attention: its forward ops as one kernel, its backward
  /// ops as another (runtime::runAttention). Every run that holds an op of a
  /// group must then hold the whole of that forward or backward, in order
  /// (else run() throws ExecutionError): callers leave out the attentions
  /// whose ops they run apart (selective recomputation reruns only the softmax).
  void fuseAttention(std::vector<AttentionGroup> groups) { attention_.set(std::move(groups)); }
  const std::vector<AttentionGroup>& fusedAttention() const { return attention_.groups(); }

  const ir::Graph& graph() const { return graph_; }
  const ValueReaders& readers() const { return readers_; }
  const Shape& shape(ir::ValueId v) const { return shapes_.at(v); }

 private:
  /// Where ops[i] starts the forward or backward of a fused attention, runs
  /// it and answers how many ops that was; 0 where ops[i] is in no group.
  std::size_t runAttentionAt(std::span<const ir::OpId> ops, std::size_t i, ValueTable& values,
                             const TensorMap& state, const TensorMap& inputs) const;
  /// Offers `group` of `ops` to `backend`; whether it ran it.
  bool runGroup(const FusedGroup& group, std::span<const ir::OpId> ops, KernelBackend& backend, ValueTable& values,
                const TensorMap& state, const TensorMap& inputs, std::int64_t step) const;

  const ir::Graph& graph_;
  std::int64_t microbatch_;
  std::vector<Shape> shapes_;
  std::vector<std::string> names_;
  ValueReaders readers_;
  FusedAttentions attention_;
};

}  // namespace meshflow::runtime
