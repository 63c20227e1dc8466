#include "runtime/parallel/Resharding.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "runtime/KernelBackend.h"

namespace meshflow::runtime {
namespace {

using ir::MeshAxes;
using ir::ShardingSpec;

std::int64_t pieces(const std::array<std::int64_t, 2>& shape, MeshAxes axes) {
  return (ir::hasAxis(axes, 0) ? shape[0] : 1) * (ir::hasAxis(axes, 1) ? shape[1] : 1);
}

void check(const ShardingSpec& spec, std::span<const std::int64_t> global, const MeshPlace& place) {
  if (place.shape[0] < 1 || place.shape[1] < 1 ||
      std::int64_t(place.devices.size()) != place.shape[0] * place.shape[1] || place.index < 0 ||
      place.index >= std::int64_t(place.devices.size()))
    throw ReshardError(fmt::format("device position {} on a ({}, {}) mesh of {} devices", place.index,
                                   place.shape[0], place.shape[1], place.devices.size()));
  if (auto why = spec.validate(global, place.logical()))
    throw ReshardError(*why);
}

// Where this device's box under `spec` starts, per dimension.
Shape boxOffset(const ShardingSpec& spec, std::span<const std::int64_t> global, const MeshPlace& place) {
  Shape offset(global.size(), 0);
  for (std::size_t d = 0; d < global.size(); ++d)
    offset[d] = place.pieceIndex(spec.dim(d)) * (global[d] / pieces(place.shape, spec.dim(d)));
  return offset;
}

// The elements of a box of shape `box` (row-major, from element `boxStart`
// of `boxes`) written into `large` at `offset` (intoLarge), or read from it
// into the box — on the device's backend where it keeps the elements
// (runtime::runCopy), so that a GPU's boxes stay on the GPU.
void copyBox(const Tensor& from, Tensor& to, std::int64_t boxStart, const Shape& box, const Shape& large,
             const Shape& offset, bool intoLarge) {
  const std::vector<std::int64_t> boxStrides = rowMajorStrides(box), largeStrides = rowMajorStrides(large);
  std::int64_t at = 0;
  for (std::size_t d = 0; d < offset.size(); ++d) at += offset[d] * largeStrides[d];
  cpu::StridedCopy c;
  c.src = &from;
  c.dst = &to;
  c.shape = box;
  c.srcStrides = intoLarge ? boxStrides : largeStrides;
  c.dstStrides = intoLarge ? largeStrides : boxStrides;
  c.srcBase = intoLarge ? boxStart : at;
  c.dstBase = intoLarge ? at : boxStart;
  runCopy(c);
}

void extractBox(const Tensor& large, Tensor& box, const Shape& offset) {
  copyBox(large, box, 0, box.shape(), large.shape(), offset, false);
}

// Zeros, written by the host: after the device's queued ops (KernelBatch), one
// of which may still read the block the allocator hands out.
Tensor like(const Tensor& t, Shape shape) {
  settleKernels();
  return Tensor(t.dtype(), std::move(shape));
}
// For a tensor every element of which a copy writes next.
Tensor filledLike(const Tensor& t, Shape shape) { return Tensor::uninitialized(t.dtype(), std::move(shape)); }

// Where the box under `spec` starts inside the box under `outer` (which
// splits a subset of the same dimensions the same way), on `place`.
Shape offsetWithin(const ShardingSpec& spec, const ShardingSpec& outer, std::span<const std::int64_t> global,
                   const MeshPlace& place) {
  Shape offset = boxOffset(spec, global, place);
  Shape base = boxOffset(outer, global, place);
  for (std::size_t d = 0; d < offset.size(); ++d) offset[d] -= base[d];
  return offset;
}

// Step 2: the dimensions `from` splits and `to` does not split the same way,
// gathered from the group of their mesh dimensions. Returns the box under
// `from` with those dimensions whole, and sets `mid` to its spec.
Tensor gatherChanged(Tensor local, std::span<const std::int64_t> global, const ShardingSpec& from,
                     const ShardingSpec& to, const MeshPlace& place, Communicator& comm, ShardingSpec& mid) {
  std::vector<MeshAxes> dims = from.dims();
  MeshAxes gathered = MeshAxes::kNone;
  for (std::size_t d = 0; d < dims.size(); ++d)
    if (dims[d] != to.dim(d) && dims[d] != MeshAxes::kNone) {
      gathered = gathered | dims[d];
      dims[d] = MeshAxes::kNone;
    }
  mid = ShardingSpec::fromDims(dims, from.partial());
  if (gathered == MeshAxes::kNone) return local;
  // Members' boxes concatenated along dimension 0 are their element lists end
  // to end (a gathered tensor has rank >= 1).
  std::vector<int> group = place.group(gathered);
  Tensor all;
  settleKernels();  // the other members read `local`
  comm.allGather(group, local, all);
  Tensor out = filledLike(local, localShape(mid, global, place));  // the members' boxes tile it
  const std::int64_t n = local.elements();
  for (std::size_t k = 0; k < group.size(); ++k) {
    Shape offset = offsetWithin(from, mid, global, place.memberOf(gathered, k));
    copyBox(all, out, std::int64_t(k) * n, local.shape(), out.shape(), offset, true);
  }
  return out;
}

// A split that moves whole from one tensor dimension to another: `current`
// splits dimension `from` over mesh axes `axes` where `to` splits dimension
// `to` over them, and neither splits the other dimension. nullopt when none.
struct SplitMove {
  std::size_t from, to;
  MeshAxes axes;
};
std::optional<SplitMove> findSplitMove(const ShardingSpec& current, const ShardingSpec& target) {
  std::size_t rank = current.dims().size();
  for (std::size_t p = 0; p < rank; ++p) {
    MeshAxes axes = current.dim(p);
    if (axes == MeshAxes::kNone || target.dim(p) != MeshAxes::kNone) continue;
    for (std::size_t q = 0; q < rank; ++q)
      if (q != p && target.dim(q) == axes && current.dim(q) == MeshAxes::kNone)
        return SplitMove{p, q, axes};
  }
  return std::nullopt;
}

// Step 2a: one split moved to another dimension with an all-to-all, as the
// planner prices it (docs/runtime.md, "Resharding"): member k of the group is
// sent this box's slice k along the new dimension and sends back its own box's
// slice for this member, which lands at its piece k of the old dimension. Each
// device moves (n-1)/n of its box instead of gathering n boxes.
Tensor moveSplit(const Tensor& local, const SplitMove& move, const MeshPlace& place,
                 Communicator& comm) {
  std::vector<int> group = place.group(move.axes);
  auto n = std::int64_t(group.size());
  Shape chunk = local.shape();
  chunk[move.to] /= n;
  Shape outShape = local.shape();
  outShape[move.to] /= n;
  outShape[move.from] *= n;
  const std::int64_t count = shapeElements(chunk);
  Tensor send = filledLike(local, {n * count});  // n chunks end to end
  for (std::int64_t k = 0; k < n; ++k) {
    Shape offset(chunk.size(), 0);
    offset[move.to] = k * chunk[move.to];
    copyBox(local, send, k * count, chunk, local.shape(), offset, false);
  }
  Tensor received;
  settleKernels();
  comm.allToAll(group, send, received);
  Tensor out = filledLike(local, outShape);  // the n received chunks tile it
  for (std::int64_t k = 0; k < n; ++k) {
    Shape offset(chunk.size(), 0);
    offset[move.from] = k * chunk[move.from];
    copyBox(received, out, k * count, chunk, outShape, offset, true);
  }
  return out;
}

}  // namespace

std::vector<int> MeshPlace::group(MeshAxes axes) const {
  std::vector<int> out;
  for (std::int64_t i = 0; i < shape[0]; ++i)
    for (std::int64_t j = 0; j < shape[1]; ++j) {
      bool sameRow = ir::hasAxis(axes, 0) || i == row();
      bool sameColumn = ir::hasAxis(axes, 1) || j == column();
      if (sameRow && sameColumn) out.push_back(devices[std::size_t(i * shape[1] + j)]);
    }
  return out;
}

std::int64_t MeshPlace::pieceIndex(MeshAxes axes) const {
  switch (axes) {
    case MeshAxes::k0:
      return row();
    case MeshAxes::k1:
      return column();
    case MeshAxes::k01:
      return index;
    case MeshAxes::kNone:
      break;
  }
  return 0;
}

MeshPlace MeshPlace::memberOf(MeshAxes axes, std::size_t member) const {
  MeshPlace out = *this;
  auto m = std::int64_t(member);
  std::int64_t i = row(), j = column();
  if (axes == MeshAxes::k0) i = m;
  if (axes == MeshAxes::k1) j = m;
  if (axes == MeshAxes::k01) i = m / shape[1], j = m % shape[1];
  out.index = int(i * shape[1] + j);
  return out;
}

ir::LogicalMesh MeshPlace::logical() const {
  ir::LogicalMesh mesh;
  mesh.shape = shape;
  return mesh;
}

Shape localShape(const ShardingSpec& spec, std::span<const std::int64_t> global, const MeshPlace& place) {
  check(spec, global, place);
  Shape shape(global.begin(), global.end());
  for (std::size_t d = 0; d < shape.size(); ++d) shape[d] /= pieces(place.shape, spec.dim(d));
  return shape;
}

Tensor takeShard(const Tensor& full, const ShardingSpec& spec, const MeshPlace& place) {
  Tensor out = filledLike(full, localShape(spec, full.shape(), place));
  extractBox(full, out, boxOffset(spec, full.shape(), place));
  return out;
}

Shape shardOffset(const ShardingSpec& spec, std::span<const std::int64_t> global, const MeshPlace& place) {
  check(spec, global, place);
  return boxOffset(spec, global, place);
}

void putShard(Tensor& full, const Tensor& box, const ShardingSpec& spec, const MeshPlace& place) {
  if (box.shape() != localShape(spec, full.shape(), place) || box.dtype() != full.dtype())
    throw ReshardError(fmt::format("a box of {} is not the one spec {} gives of {}", box.typeText(),
                                   spec.toString(), full.typeText()));
  copyBox(box, full, 0, box.shape(), full.shape(), boxOffset(spec, full.shape(), place), true);
}

Tensor reshard(Tensor local, std::span<const std::int64_t> global, const ShardingSpec& from, const ShardingSpec& to,
               const MeshPlace& place, Communicator& comm) {
  Shape expected = localShape(from, global, place);
  localShape(to, global, place);
  if (local.shape() != expected)
    throw ReshardError(fmt::format("the local box is {} but spec {} on a ({}, {}) mesh holds {}",
                                   local.typeText(), from.toString(), place.shape[0], place.shape[1],
                                   shapeText(expected)));
  // Step 1: sum what the target does not keep partial.
  ShardingSpec current = from;
  if (MeshAxes summed = ir::withoutAxes(from.partial(), to.partial()); summed != MeshAxes::kNone) {
    settleKernels();
    comm.allReduce(place.group(summed), {&local});
    current = ShardingSpec::fromDims(from.dims(), to.partial());
  }
  // Step 2a: splits that move to another dimension, by all-to-all.
  while (auto move = findSplitMove(current, to)) {
    local = moveSplit(local, *move, place, comm);
    std::vector<MeshAxes> dims = current.dims();
    dims[move->from] = MeshAxes::kNone;
    dims[move->to] = move->axes;
    current = ShardingSpec::fromDims(dims, current.partial());
  }
  // Steps 2 and 3.
  ShardingSpec mid;
  Tensor out = gatherChanged(std::move(local), global, current, to, place, comm, mid);
  if (mid.dims() != to.dims()) {
    Tensor box = filledLike(out, localShape(to, global, place));
    extractBox(out, box, offsetWithin(to, mid, global, place));
    out = std::move(box);
  }
  // Step 4: a new partial sum keeps the value on the first member of its group.
  MeshAxes added = ir::withoutAxes(to.partial(), from.partial());
  if (added != MeshAxes::kNone && place.pieceIndex(added) != 0) out = like(out, out.shape());
  return out;
}

}  // namespace meshflow::runtime
