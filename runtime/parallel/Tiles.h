// Values crossing between pipeline ranks whose meshes differ in size travel in
// tiles (passes/Lowering.cpp): sender k sends tile i to receiver i for every i
// ≡ k mod senders, and the receivers all-gather their tiles into the whole
// values. A tile of a bundle cuts every value's flattened elements into equal
// runs, one per receiver; the bytes add up to the whole bundle's, as the
// Program's SEND sizes model them.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/Communicator.h"
#include "runtime/parallel/OpRunner.h"

namespace meshflow::runtime {

/// Tile `index` of `parts` of `whole`: each value's elements, flattened, cut
/// into runs of ceil(n / parts), the last ones zero-padded to that length. With
/// one part, a copy of `whole`.
ValueTable tileOf(const ValueTable& whole, int index, int parts);

/// The whole values from this device's `tile` of them, all-gathered over
/// `group` (the receiving mesh, tile i on member i); `shape` gives each value's
/// shape. Every member calls it with tiles of the same values.
ValueTable gatherTiles(ValueTable&& tile, const std::vector<int>& group, Communicator& comm,
                       const std::function<const Shape&(ir::ValueId)>& shape);

}  // namespace meshflow::runtime
