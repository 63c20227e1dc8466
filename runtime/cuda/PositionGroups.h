// An embedding gradient's positions grouped by id, for a GPU thread per
// (id, column) that sums its id's rows of dy in position order: the cpu
// kernel's order (runtime/cpu/EmbeddingKernels.cpp), so the same bits, with
// ids × columns threads instead of one thread per column walking every
// position. Made on the host from the ids (which the backend reads there to
// check them anyway) and handed to cuda::embeddingGrad as one i32 array.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace meshflow::runtime::cuda {

struct PositionGroups {
  /// Positions, grouped by id (ids ascending), in position order within a group.
  std::vector<std::int32_t> order;
  /// Group g's positions are order[starts[g], starts[g + 1]); groups() + 1 entries.
  std::vector<std::int32_t> starts;
  /// Group g's id.
  std::vector<std::int32_t> ids;

  std::int64_t groups() const { return static_cast<std::int64_t>(ids.size()); }
  /// order, starts and ids, one after the other: what the kernel reads.
  std::vector<std::int32_t> packed() const;
};

/// Throws std::invalid_argument when there are 2^31 positions or more (i32 indices).
PositionGroups groupPositions(std::span<const std::int32_t> ids);

}  // namespace meshflow::runtime::cuda
