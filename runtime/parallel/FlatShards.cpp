#include "runtime/parallel/FlatShards.h"

#include <algorithm>
#include <stdexcept>

namespace meshflow::runtime {
namespace {

// Elements [first, first + count) of `from`, clipped at its end; the rest of
// `to` (count elements) is zero.
void copyRange(std::span<const float> from, std::int64_t first, std::int64_t count, std::span<float> to) {
  const auto n = static_cast<std::int64_t>(from.size());
  const std::int64_t end = std::clamp<std::int64_t>(first + count, 0, n);
  const std::int64_t begin = std::min(first, n);
  std::copy(from.begin() + begin, from.begin() + end, to.begin());
  std::fill(to.begin() + (end - begin), to.begin() + count, 0.0f);
}

}  // namespace

std::int64_t flatShardSize(std::int64_t elements, int replicas) {
  if (replicas < 1) throw std::logic_error("a flat shard needs at least one replica");
  return (elements + replicas - 1) / replicas;
}

Tensor flatShardOf(const Tensor& t, int replica, int replicas) {
  const std::int64_t c = flatShardSize(t.elements(), replicas);
  Tensor part = Tensor::uninitialized(ir::DType::F32, {c});
  copyRange(t.f32(), replica * c, c, part.f32());
  return part;
}

void putFlatShard(Tensor& whole, const Tensor& part, int replica, int replicas) {
  const std::int64_t c = flatShardSize(whole.elements(), replicas);
  if (part.elements() != c) throw std::logic_error("a flat shard of the wrong size");
  const std::int64_t first = replica * c;
  const std::int64_t count = std::clamp<std::int64_t>(whole.elements() - first, 0, c);
  auto from = part.f32();
  std::copy(from.begin(), from.begin() + count, whole.f32().begin() + first);
}

Tensor packParts(const std::vector<const Tensor*>& tensors, int replicas) {
  std::int64_t width = 0;
  for (const Tensor* t : tensors) width += flatShardSize(t->elements(), replicas);
  Tensor packed = Tensor::uninitialized(ir::DType::F32, {replicas, width});
  auto out = packed.f32();
  for (int i = 0; i < replicas; ++i) {
    std::int64_t column = 0;
    for (const Tensor* t : tensors) {
      const std::int64_t c = flatShardSize(t->elements(), replicas);
      copyRange(t->f32(), i * c, c, out.subspan(static_cast<std::size_t>(i * width + column)));
      column += c;
    }
  }
  return packed;
}

std::vector<Tensor> unpackRow(const Tensor& row, const std::vector<std::int64_t>& elements, int replicas) {
  std::vector<Tensor> parts;
  auto in = row.f32();
  std::int64_t column = 0;
  for (std::int64_t n : elements) {
    const std::int64_t c = flatShardSize(n, replicas);
    Tensor part = Tensor::uninitialized(ir::DType::F32, {c});
    copyRange(in, column, c, part.f32());
    parts.push_back(std::move(part));
    column += c;
  }
  if (column != static_cast<std::int64_t>(in.size())) throw std::logic_error("a packed row of the wrong width");
  return parts;
}

Tensor packRow(const std::vector<const Tensor*>& parts) {
  std::int64_t width = 0;
  for (const Tensor* p : parts) width += p->elements();
  Tensor row = Tensor::uninitialized(ir::DType::F32, {1, width});
  auto out = row.f32();
  std::int64_t column = 0;
  for (const Tensor* p : parts) {
    std::copy(p->f32().begin(), p->f32().end(), out.begin() + column);
    column += p->elements();
  }
  return row;
}

Tensor unpackWhole(const Tensor& gathered, std::int64_t offset, const Shape& shape, int replicas) {
  const std::int64_t n = shapeElements(shape);
  const std::int64_t c = flatShardSize(n, replicas);
  const std::int64_t width = gathered.elements() / replicas;
  Tensor whole = Tensor::uninitialized(ir::DType::F32, shape);
  auto in = gathered.f32();
  auto out = whole.f32();
  for (int i = 0; i < replicas; ++i) {
    const std::int64_t count = std::clamp<std::int64_t>(n - i * c, 0, c);
    auto from = in.begin() + (i * width + offset);
    std::copy(from, from + count, out.begin() + i * c);
  }
  return whole;
}

}  // namespace meshflow::runtime
