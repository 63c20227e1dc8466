#include "runtime/parallel/Tiles.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace meshflow::runtime {
namespace {

// Elements [first, first + count) of `from` into `to` from element `at` on.
void copyElements(const Tensor& from, std::int64_t first, std::int64_t count, Tensor& to, std::int64_t at) {
  if (count <= 0) return;
  const auto size = static_cast<std::int64_t>(ir::dtypeBytes(from.dtype()));
  std::copy_n(from.raw().data() + first * size, count * size, to.raw().data() + at * size);
}

std::int64_t runLength(std::int64_t elements, int parts) { return (elements + parts - 1) / parts; }

}  // namespace

ValueTable tileOf(const ValueTable& whole, int index, int parts) {
  if (parts <= 1) return whole;
  ValueTable tile;
  for (const auto& [v, t] : whole) {
    const std::int64_t run = runLength(t.elements(), parts);
    const std::int64_t first = std::min(t.elements(), run * index);
    Tensor piece(t.dtype(), {run});
    copyElements(t, first, std::min(run, t.elements() - first), piece, 0);
    tile.emplace(v, std::move(piece));
  }
  return tile;
}

ValueTable gatherTiles(ValueTable&& tile, const std::vector<int>& group, Communicator& comm,
                       const std::function<const Shape&(ir::ValueId)>& shape) {
  const int parts = static_cast<int>(group.size());
  ValueTable whole;
  for (auto& [v, piece] : tile) {
    Tensor gathered;
    comm.allGather(group, piece, gathered);
    Tensor value(piece.dtype(), shape(v));
    if (runLength(value.elements(), parts) != piece.elements())
      throw std::logic_error(fmt::format("a tile of value {} has {} elements, not a {}th of {}", v,
                                         piece.elements(), parts, shapeText(shape(v))));
    copyElements(gathered, 0, value.elements(), value, 0);
    whole.emplace(v, std::move(value));
  }
  return whole;
}

}  // namespace meshflow::runtime
