#include "runtime/parallel/FlatShards.h"

#include <algorithm>
#include <stdexcept>

#include "runtime/KernelBackend.h"

namespace meshflow::runtime {
namespace {

// `count` elements of `from` from `fromStart` into `to` at `toStart`, on the
// device's backend where it keeps them (runtime::runCopy).
void copyElements(const Tensor& from, std::int64_t fromStart, Tensor& to, std::int64_t toStart, std::int64_t count) {
  if (count <= 0) return;
  cpu::StridedCopy c;
  c.src = &from;
  c.dst = &to;
  c.shape = {count};
  c.srcStrides = {1};
  c.dstStrides = {1};
  c.srcBase = fromStart;
  c.dstBase = toStart;
  runCopy(c);
}

// Elements [first, first + count) of `from`, clipped at its end, into `to` at
// `toStart`; the rest of those count elements of `to` is zero.
void copyRange(const Tensor& from, std::int64_t first, std::int64_t count, Tensor& to, std::int64_t toStart) {
  if (from.dtype() != ir::DType::F32) throw std::logic_error("flat shards are of f32 tensors, not " + from.typeText());
  const std::int64_t n = from.elements();
  const std::int64_t end = std::clamp<std::int64_t>(first + count, 0, n);
  const std::int64_t begin = std::min(first, n);
  copyElements(from, begin, to, toStart, end - begin);
  if (const std::int64_t padding = count - (end - begin); padding > 0) {
    // Zeros written by the host, maybe into a block a queued op still reads
    // (KernelBatch): after the queued ops.
    settleKernels();
    copyElements(Tensor(ir::DType::F32, {padding}), 0, to, toStart + (end - begin), padding);
  }
}

}  // namespace

std::int64_t flatShardSize(std::int64_t elements, int replicas) {
  if (replicas < 1) throw std::logic_error("a flat shard needs at least one replica");
  return (elements + replicas - 1) / replicas;
}

Tensor flatShardOf(const Tensor& t, int replica, int replicas) {
  const std::int64_t c = flatShardSize(t.elements(), replicas);
  Tensor part = Tensor::uninitialized(ir::DType::F32, {c});
  copyRange(t, replica * c, c, part, 0);
  return part;
}

void putFlatShard(Tensor& whole, const Tensor& part, int replica, int replicas) {
  const std::int64_t c = flatShardSize(whole.elements(), replicas);
  if (part.elements() != c) throw std::logic_error("a flat shard of the wrong size");
  const std::int64_t first = replica * c;
  copyElements(part, 0, whole, first, std::clamp<std::int64_t>(whole.elements() - first, 0, c));
}

Tensor packParts(const std::vector<const Tensor*>& tensors, int replicas) {
  std::int64_t width = 0;
  for (const Tensor* t : tensors) width += flatShardSize(t->elements(), replicas);
  Tensor packed = Tensor::uninitialized(ir::DType::F32, {replicas, width});
  for (int i = 0; i < replicas; ++i) {
    std::int64_t column = 0;
    for (const Tensor* t : tensors) {
      const std::int64_t c = flatShardSize(t->elements(), replicas);
      copyRange(*t, i * c, c, packed, i * width + column);
      column += c;
    }
  }
  return packed;
}

std::vector<Tensor> unpackRow(const Tensor& row, const std::vector<std::int64_t>& elements, int replicas) {
  std::vector<Tensor> parts;
  std::int64_t column = 0;
  for (std::int64_t n : elements) {
    const std::int64_t c = flatShardSize(n, replicas);
    Tensor part = Tensor::uninitialized(ir::DType::F32, {c});
    copyRange(row, column, c, part, 0);
    parts.push_back(std::move(part));
    column += c;
  }
  if (column != row.elements()) throw std::logic_error("a packed row of the wrong width");
  return parts;
}

Tensor packRow(const std::vector<const Tensor*>& parts) {
  std::int64_t width = 0;
  for (const Tensor* p : parts) width += p->elements();
  Tensor row = Tensor::uninitialized(ir::DType::F32, {1, width});
  std::int64_t column = 0;
  for (const Tensor* p : parts) {
    copyElements(*p, 0, row, column, p->elements());
    column += p->elements();
  }
  return row;
}

Tensor unpackWhole(const Tensor& gathered, std::int64_t offset, const Shape& shape, int replicas) {
  const std::int64_t n = shapeElements(shape);
  const std::int64_t c = flatShardSize(n, replicas);
  const std::int64_t width = gathered.elements() / replicas;
  Tensor whole = Tensor::uninitialized(ir::DType::F32, shape);
  for (int i = 0; i < replicas; ++i)
    copyElements(gathered, i * width + offset, whole, i * c, std::clamp<std::int64_t>(n - i * c, 0, c));
  return whole;
}

}  // namespace meshflow::runtime
