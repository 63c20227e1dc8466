// Resharding: one tensor's layout on a stage's logical mesh changed from one
// ShardingSpec to another, by the devices of the mesh together — the edge
// conversions of SPMD execution (docs/runtime.md, "Resharding").
//
// A device at mesh coordinates (i, j) of an a × b mesh holds, under a spec, one
// box of the global tensor: a dimension split over mesh dimension 0 is cut in
// a pieces and the device holds piece i; over dimension 1, piece j; over both
// (S01), piece i·b + j. A partial sum over some mesh dimensions means the
// global tensor is the sum of the boxes held along them.
//
// reshard() works in these steps, each a no-op when it has nothing to do:
// 1. a partial sum the target does not keep is all-reduced over its mesh
//    dimensions;
// 2a. a split the target moves whole to another tensor dimension (S0 on dim p
//    → S0 on dim q, neither splitting the other) is an all-to-all over the
//    split's group: the expert-parallel exchange of a mixture of experts,
//    moving (n−1)/n of the box rather than gathering n boxes;
// 2b. dimensions the source splits and the target does not split the same way
//    are all-gathered (the group of the source's split mesh dimensions, each
//    member's box placed where it belongs);
// 3. the target's box is cut out locally;
// 4. for a partial sum over mesh dimensions the source does not sum over, the
//    first device of each group along them keeps the box and the others hold
//    zeros (exact: no division).
// That moves no more than the all-to-all, all-gather and all-reduce the
// planner prices. Reductions are in the group's mesh order, so every device of
// a group gets bit-identical sums.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <vector>

#include "ir/Sharding.h"
#include "runtime/Communicator.h"
#include "runtime/Tensor.h"

namespace meshflow::runtime {

/// One device's place on a stage's logical mesh.
struct MeshPlace {
  std::array<std::int64_t, 2> shape{1, 1};  ///< (a, b)
  std::vector<int> devices;                 ///< a·b device ids, row-major: (i, j) at i·b + j.
  int index = 0;                            ///< This device's position in `devices`.

  std::int64_t row() const { return index / shape[1]; }
  std::int64_t column() const { return index % shape[1]; }
  /// The devices that share this device's coordinates off `axes`, in mesh order
  /// (for k01, the whole mesh row-major). Just this device for kNone.
  std::vector<int> group(ir::MeshAxes axes) const;
  /// This device's piece number along `axes` (0 for kNone), as a spec's split uses it.
  std::int64_t pieceIndex(ir::MeshAxes axes) const;
  /// The place of member `member` of group(axes).
  MeshPlace memberOf(ir::MeshAxes axes, std::size_t member) const;
  ir::LogicalMesh logical() const;
};

/// The spec and mesh do not fit the tensor, or the local box is not the one
/// the source spec gives this device.
class ReshardError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The shape of the box a device holds of a tensor of `global` shape under `spec`.
Shape localShape(const ir::ShardingSpec& spec, std::span<const std::int64_t> global,
                 const MeshPlace& place);

/// This device's box of `full` (the whole tensor) under `spec`; no communication.
/// A partial sum in `spec` is ignored: the box is of `full` itself.
Tensor takeShard(const Tensor& full, const ir::ShardingSpec& spec, const MeshPlace& place);

/// Where this device's box under `spec` starts in a tensor of `global` shape.
Shape shardOffset(const ir::ShardingSpec& spec, std::span<const std::int64_t> global, const MeshPlace& place);

/// Writes this device's box under `spec` into `full` (the inverse of takeShard).
void putShard(Tensor& full, const Tensor& box, const ir::ShardingSpec& spec, const MeshPlace& place);

/// This device's box under `to` of the tensor whose box under `from` is `local`.
/// Every device of the mesh calls it with the same arguments but `local`.
/// Throws ReshardError for a spec that does not fit or a box of the wrong shape.
/// `local` is taken by value: pass it moved when the caller no longer needs it.
Tensor reshard(Tensor local, std::span<const std::int64_t> global, const ir::ShardingSpec& from,
               const ir::ShardingSpec& to, const MeshPlace& place, Communicator& comm);

}  // namespace meshflow::runtime
