// Runs ops of a training graph SPMD on the devices of one logical mesh: every
// device runs every op on its boxes, inputs resharded to the op's layout
// (SpmdRules.h) and a planned forward op's outputs resharded to its strategy's
// output specs — the local kernels plus the collectives the strategies imply
// (docs/runtime.md, "SPMD execution").
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

#include "ir/Graph.h"
#include "ir/Sharding.h"
#include "runtime/Communicator.h"
#include "runtime/Tensor.h"
#include "runtime/parallel/OpRunner.h"
#include "runtime/parallel/Resharding.h"
#include "runtime/parallel/ValueLifetimes.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::runtime {

/// One value on one device: its box and the spec it is held in.
struct ShardedValue {
  Tensor local;
  ir::ShardingSpec spec;
};
using ShardedValues = std::map<ir::ValueId, ShardedValue>;

/// A plan's strategy for one forward op: the specs of its inputs and outputs
/// (for an Input or Parameter op, the output spec is how it is held).
struct PlannedSpecs {
  std::vector<ir::ShardingSpec> inputs;
  std::vector<ir::ShardingSpec> outputs;
};

class SpmdRunner {
 public:
  /// Binds the symbolic batch of every value of `graph` to `microbatch`, on an
  /// a × b `mesh`. `planned` holds the strategies of forward ops by op id; ops
  /// without one, and planned specs that do not fit the bound shapes, take
  /// their layout from the rules alone.
  SpmdRunner(const ir::Graph& graph, std::int64_t microbatch, std::array<std::int64_t, 2> mesh,
             std::map<ir::OpId, PlannedSpecs> planned);

  /// Runs `ops` in order on this device. Parameters and optimizer state are
  /// read from `state` as this device's boxes under heldSpec, inputs whole
  /// from `inputs` (by bindingName) and boxed in theirs; with `releases`, values
  /// are dropped after their last use (runtime/parallel/ValueLifetimes.h).
  /// Throws ExecutionError naming the op.
  void run(std::span<const ir::OpId> ops, ShardedValues& values, const TensorMap& state,
           const TensorMap& inputs, std::int64_t step, const MeshPlace& place, Communicator& comm,
           const ReleasePlan* releases = nullptr, std::int64_t firstSample = 0,
           double* moeDropped = nullptr) const;

  /// The whole value of `v` on every device (gathered and summed as its spec
  /// needs); every device of the mesh calls it together.
  Tensor whole(ir::ValueId v, const ShardedValues& values, const MeshPlace& place, Communicator& comm) const;

  const Shape& shape(ir::ValueId v) const { return shapes_.at(v); }

  /// How the leaf value `v` (an input, parameter or optimizer state) is held:
  /// its planned spec (optimizer state in its parameter's) when that fits,
  /// otherwise replicated.
  ir::ShardingSpec heldSpec(ir::ValueId v) const;

  /// Runs each of `groups` as a fused attention (OpRunner::fuseAttention) on
  /// every device's boxes: q, k, v (and the backward's dOut) in q's layout
  /// on their leading dimensions — batch, heads — and whole along rows and
  /// features (SpmdAttention.cpp).
  void fuseAttention(std::vector<AttentionGroup> groups) { attention_.set(std::move(groups)); }

 private:
  /// Where ops[i] starts a fused attention's forward or backward, runs it and
  /// answers how many ops that was; 0 where ops[i] is in no group.
  std::size_t runAttentionAt(std::span<const ir::OpId> ops, std::size_t i, ShardedValues& values,
                             const TensorMap& state, const TensorMap& inputs, const MeshPlace& place,
                             Communicator& comm) const;
  /// `v`'s box in `spec` (resharded when held otherwise).
  Tensor operandIn(ir::OpId reader, ir::ValueId v, const ir::ShardingSpec& spec, ShardedValues& values,
                   const TensorMap& state, const TensorMap& inputs, const MeshPlace& place,
                   Communicator& comm) const;
  /// Keeps `local` (in `spec`) as `v`, resharded to the output spec the plan
  /// gives op `producer` when it gives one.
  void keep(ir::ValueId v, ir::OpId producer, Tensor local, ir::ShardingSpec spec, ShardedValues& values,
            const MeshPlace& place, Communicator& comm) const;

 private:
  const ShardedValue& lookup(ir::OpId reader, ir::ValueId v, ShardedValues& values, const TensorMap& state,
                             const TensorMap& inputs, const MeshPlace& place) const;
  bool fits(const ir::ShardingSpec& spec, const Shape& shape) const;
  PlannedSpecs usablePlan(ir::OpId id) const;

  const ir::Graph& graph_;
  std::int64_t microbatch_;
  std::map<ir::OpId, PlannedSpecs> planned_;
  ir::LogicalMesh mesh_;
  std::vector<std::string> names_;
  std::vector<Shape> shapes_;
  FusedAttentions attention_;
};

}  // namespace meshflow::runtime
