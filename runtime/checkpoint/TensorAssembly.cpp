#include "runtime/checkpoint/TensorAssembly.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <optional>

namespace meshflow::runtime::checkpoint {
namespace {

// The block a piece covers (a flat piece covers a run of it).
const Shape& blockShape(const ShardPiece& piece) {
  return piece.flat ? piece.flat->block : piece.tensor.shape();
}

void checkPlacement(const SourcedPiece& sourced, ir::DType dtype, const Shape& globalShape) {
  const ShardPiece& piece = *sourced.piece;
  const Tensor& block = piece.tensor;
  auto fail = [&](const std::string& message) { throw AssemblyError(sourced.source, message); };
  if (!block.allocated()) fail("the piece holds no tensor");
  if (block.dtype() != dtype)
    fail(fmt::format("an {} piece of an {} tensor", ir::dtypeName(block.dtype()),
                     ir::dtypeName(dtype)));
  if (piece.globalShape != globalShape)
    fail(fmt::format("the piece gives the tensor shape {}, not {}", shapeText(piece.globalShape),
                     shapeText(globalShape)));
  const Shape& box = blockShape(piece);
  if (piece.offset.size() != globalShape.size() || box.size() != globalShape.size())
    fail(fmt::format("offset {} and block shape {} do not have the tensor's rank {}",
                     shapeText(piece.offset), shapeText(box), globalShape.size()));
  for (std::size_t d = 0; d < globalShape.size(); ++d)
    if (box[d] < 0 || piece.offset[d] < 0 || piece.offset[d] > globalShape[d] - box[d])
      fail(fmt::format("a block of shape {} at offset {} lies outside the shape {}",
                       shapeText(box), shapeText(piece.offset), shapeText(globalShape)));
  if (piece.flat && (block.rank() != 1 || piece.flat->begin < 0 ||
                     piece.flat->begin > shapeElements(box) - block.elements()))
    fail(fmt::format("a flat run of {} elements from element {} lies outside the block of shape {}",
                     block.elements(), piece.flat->begin, shapeText(box)));
}

// Whether `available` elements can cover `shape`, computed without overflowing on a
// shape read from a corrupt file.
bool fitsIn(const Shape& shape, std::uint64_t available) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return true;
  std::uint64_t elements = 1;
  for (auto d : shape) {
    if (elements > available / static_cast<std::uint64_t>(d)) return false;
    elements *= static_cast<std::uint64_t>(d);
  }
  return elements <= available;
}

void checkShape(const Shape& globalShape) {
  for (auto d : globalShape)
    if (d < 0) throw AssemblyError({}, "negative dimension in the shape " + shapeText(globalShape));
}

void checkEnoughElements(const Shape& globalShape, const std::vector<SourcedPiece>& pieces) {
  std::uint64_t held = 0;
  for (const SourcedPiece& sourced : pieces)
    held += static_cast<std::uint64_t>(sourced.piece->tensor.elements());
  if (!fitsIn(globalShape, held))
    throw AssemblyError(
        {}, fmt::format("the pieces hold {} elements, too few to cover the shape {}", held,
                        shapeText(globalShape)));
}

// Steps a row-major index through `shape`, the last dimension fastest.
void advance(std::vector<std::int64_t>& index, const Shape& shape) {
  for (std::size_t d = index.size(); d-- > 0;) {
    if (++index[d] < shape[d]) return;
    index[d] = 0;
  }
}

std::vector<std::int64_t> unflatten(std::int64_t flat, const Shape& shape) {
  std::vector<std::int64_t> index(shape.size(), 0);
  for (std::size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

bool contains(const ShardPiece& piece, const std::vector<std::int64_t>& index) {
  const Shape& box = blockShape(piece);
  std::vector<std::int64_t> inBlock(index.size());
  for (std::size_t d = 0; d < index.size(); ++d) {
    if (index[d] < piece.offset[d] || index[d] >= piece.offset[d] + box[d]) return false;
    inBlock[d] = index[d] - piece.offset[d];
  }
  if (!piece.flat) return true;
  const auto strides = rowMajorStrides(box);
  std::int64_t flat = 0;
  for (std::size_t d = 0; d < index.size(); ++d) flat += inBlock[d] * strides[d];
  return flat >= piece.flat->begin && flat < piece.flat->begin + piece.tensor.elements();
}

// Copies one block into `whole`, marking what it covers. An element another block
// covered already must hold the same bits; the first that does not is returned.
template <typename T>
std::optional<std::int64_t> place(std::span<T> whole, std::vector<bool>& covered,
                                  const Shape& globalShape, const ShardPiece& piece,
                                  std::span<const T> block) {
  const auto strides = rowMajorStrides(globalShape);
  const Shape& box = blockShape(piece);
  // A flat piece starts inside its block; a block at its first element.
  std::vector<std::int64_t> index =
      piece.flat && !block.empty() ? unflatten(piece.flat->begin, box)
                                   : std::vector<std::int64_t>(globalShape.size(), 0);
  for (const T& value : block) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < index.size(); ++d)
      flat += (piece.offset[d] + index[d]) * strides[d];
    if (!covered[flat]) {
      whole[flat] = value;
      covered[flat] = true;
    } else if (std::memcmp(&whole[flat], &value, sizeof(T)) != 0) {
      return flat;
    }
    advance(index, box);
  }
  return std::nullopt;
}

std::optional<std::int64_t> place(Tensor& whole, std::vector<bool>& covered,
                                  const ShardPiece& piece) {
  if (whole.dtype() == ir::DType::F32)
    return place(whole.f32(), covered, whole.shape(), piece, piece.tensor.f32());
  if (whole.dtype() == ir::DType::F16) return place(whole.f16(), covered, whole.shape(), piece, piece.tensor.f16());
  if (whole.dtype() == ir::DType::BF16)
    return place(whole.bf16(), covered, whole.shape(), piece, piece.tensor.bf16());
  return place(whole.i32(), covered, whole.shape(), piece, piece.tensor.i32());
}

[[noreturn]] void reportDisagreement(const std::vector<SourcedPiece>& pieces, std::size_t at,
                                     const Shape& globalShape, std::int64_t flat) {
  const auto index = unflatten(flat, globalShape);
  std::string other = "an earlier piece";
  for (std::size_t i = 0; i < at; ++i)
    if (contains(*pieces[i].piece, index)) {
      other = pieces[i].source;
      break;
    }
  throw AssemblyError(
      pieces[at].source,
      fmt::format("overlaps {} at element {} with different bits", other, shapeText(index)));
}

void checkCovered(const std::vector<bool>& covered, const Shape& globalShape) {
  auto gap = std::find(covered.begin(), covered.end(), false);
  if (gap != covered.end())
    throw AssemblyError({}, fmt::format("element {} is in no piece",
                                        shapeText(unflatten(gap - covered.begin(), globalShape))));
}

}  // namespace

Tensor assembleTensor(ir::DType dtype, const Shape& globalShape,
                      const std::vector<SourcedPiece>& pieces) {
  // The shape first: checkPlacement's bounds arithmetic assumes no negative dimension.
  checkShape(globalShape);
  for (const SourcedPiece& sourced : pieces) checkPlacement(sourced, dtype, globalShape);
  // Before allocating: a corrupt shape could ask for more memory than there is.
  checkEnoughElements(globalShape, pieces);
  Tensor whole(dtype, globalShape);
  std::vector<bool> covered(static_cast<std::size_t>(whole.elements()), false);
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (auto flat = place(whole, covered, *pieces[i].piece))
      reportDisagreement(pieces, i, globalShape, *flat);
  checkCovered(covered, globalShape);
  return whole;
}

}  // namespace meshflow::runtime::checkpoint
