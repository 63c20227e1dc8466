// Flat shards of tensors over data-parallel replicas, for a sharded optimizer
// (ZeRO-like; docs/runtime.md, "Sharded optimizer state").
//
// A tensor of n elements is flattened and padded with zeros to R·c elements,
// c = ceil(n / R); replica i owns elements [i·c, (i+1)·c). A shape's boxes
// (sharding specs) cannot express such a range — it may cut rows — which is why
// the shards are flat. Several tensors travel in one collective as a packed
// [R, Σ c] tensor whose row i is every tensor's part i in order: the
// communicator's reduceScatter and allGather split and join along axis 0.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/Tensor.h"

namespace meshflow::runtime {

/// Elements each of `replicas` owns of a tensor of `elements`: ceil(n / R).
std::int64_t flatShardSize(std::int64_t elements, int replicas);

/// Replica `replica`'s part of `t`, flattened: [c], zero past the end of t.
Tensor flatShardOf(const Tensor& t, int replica, int replicas);

/// Writes `part` (replica `replica`'s [c]) into its range of `whole`; the
/// padding is dropped.
void putFlatShard(Tensor& whole, const Tensor& part, int replica, int replicas);

/// The packed [replicas, Σ c_k] tensor of `tensors` (f32): row i holds part i
/// of each tensor, in order.
Tensor packParts(const std::vector<const Tensor*>& tensors, int replicas);

/// One packed row ([Σ c_k] or [1, Σ c_k]) cut back into its tensors' parts,
/// each [c_k] for c_k = flatShardSize(elements[k], replicas).
std::vector<Tensor> unpackRow(const Tensor& row, const std::vector<std::int64_t>& elements, int replicas);

/// Parts (each [c_k]) joined into one packed row [1, Σ c_k].
Tensor packRow(const std::vector<const Tensor*>& parts);

/// Tensor k of a gathered [replicas, Σ c] tensor, whole: its parts from every
/// row in order, the padding dropped, under `shape`. `offset` is Σ c_j for j < k.
Tensor unpackWhole(const Tensor& gathered, std::int64_t offset, const Shape& shape, int replicas);

}  // namespace meshflow::runtime
