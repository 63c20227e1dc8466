// Host-side simplification of the index a GPU kernel walks with one division
// per dimension: dimensions of size 1 dropped, and neighbours that both
// operands walk contiguously (the outer stride is the inner one times the
// inner extent, on both sides; both 0 counts) merged into one. The walk reads
// and writes the same elements with fewer dimensions. For CopyIndex
// (LayoutKernels.h) and BroadcastIndex (TrainingKernels.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace meshflow::runtime::cuda {

template <class Index, std::size_t Rank>
Index mergedDimensions(const Index& index, std::int64_t (Index::*shape)[Rank], std::int64_t (Index::*a)[Rank],
                       std::int64_t (Index::*b)[Rank]) {
  Index out = index;  // what is not a dimension (bases) stays
  out.rank = 0;
  for (int d = 0; d < index.rank; ++d) {
    const std::int64_t extent = (index.*shape)[d];
    if (extent == 1) continue;
    const int last = out.rank - 1;
    if (last >= 0 && (out.*a)[last] == (index.*a)[d] * extent && (out.*b)[last] == (index.*b)[d] * extent) {
      (out.*shape)[last] *= extent;
      (out.*a)[last] = (index.*a)[d];
      (out.*b)[last] = (index.*b)[d];
      continue;
    }
    (out.*shape)[out.rank] = extent;
    (out.*a)[out.rank] = (index.*a)[d];
    (out.*b)[out.rank] = (index.*b)[d];
    ++out.rank;
  }
  return out;
}

}  // namespace meshflow::runtime::cuda
