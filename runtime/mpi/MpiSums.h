// The MPI transport's element ranges and sums (internal to meshflow_mpi):
// the cpu backend's deterministic group-order sums, on raw bytes.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/Tensor.h"

namespace meshflow::runtime::mpi {

/// to[i] = a[i] + b[i] for one dtype, rounding half sums once per addition as
/// the cpu backend does; i32 wraps modulo 2^32.
void addInto(ir::DType dtype, const std::byte* a, const std::byte* b, std::byte* to,
             std::size_t count);
/// to = ((x0 + x1) + x2) + ... over `inputs` in order: the cpu backend's
/// orderedSum, element by element.
void orderedSum(ir::DType dtype, const std::vector<const std::byte*>& inputs, std::byte* to,
                std::size_t count);
/// The first element of chunk k of n over `elements` (chunk sizes differ by at most one).
std::size_t chunkStart(std::size_t elements, std::size_t k, std::size_t n);
/// `shape` with axis 0 split into `parts`.
Shape sliceShape(Shape shape, std::size_t parts);

}  // namespace meshflow::runtime::mpi
