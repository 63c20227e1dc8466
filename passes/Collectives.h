// α–β costs of collectives on a logical mesh, and of resharding a tensor between
// two sharding specs. Costs are seconds; bytes are per device as documented on
// each function. See docs/sharding.md for the formulas and their sources.
#pragma once

#include <cstdint>
#include <span>

#include "ir/Sharding.h"

namespace meshflow::passes {

enum class Collective { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast };

/// Cost of one collective over the devices of `axes` (one mesh dimension, or both:
/// then n = a·b and the slower link's α and β apply, as in Alpa). `bytes` is:
///   all-reduce      the buffer each device holds (and ends with),
///   all-gather      the gathered buffer each device ends with,
///   reduce-scatter  the buffer each device starts with,
///   all-to-all      the buffer each device holds (same size before and after),
///   broadcast       the buffer broadcast from the root.
/// Ring formulas (n devices):
///   all-reduce      2(n−1)/n·bytes·β + 2(n−1)·α
///   all-gather      (n−1)/n·bytes·β + (n−1)·α
///   reduce-scatter  (n−1)/n·bytes·β + (n−1)·α
///   all-to-all      (n−1)/n²·bytes·(n/2)·β + (n−1)·α   (Alpa's β term)
///   broadcast       bytes·β + (n−1)·α                   (pipelined chain)
/// A group of one device costs 0.
double collectiveCost(Collective kind, double bytes, ir::MeshAxes axes,
                      const ir::LogicalMesh& mesh);

/// Cost of converting a tensor of `shape` from spec `from` to spec `to`: 0 for the
/// same spec and for local slicing (replicated → sharded), all-gather to undo a
/// split, all-to-all to move a split to another tensor dimension, all-reduce to
/// resolve a partial sum into a replica, reduce-scatter to resolve it into a split.
/// Infinity when impossible: a spec invalid for the shape or mesh, or a target that
/// is a partial sum over a mesh dimension where the source is not.
double reshardingCost(const ir::ShardingSpec& from, const ir::ShardingSpec& to,
                      std::span<const int64_t> shape, double bytesPerElement,
                      const ir::LogicalMesh& mesh);

}  // namespace meshflow::passes
