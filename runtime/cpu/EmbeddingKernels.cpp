// Embedding lookup and its gradient, a scatter-add into the table.
#include <fmt/format.h>

#include <algorithm>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

std::int64_t checkedId(const KernelArgs& args, std::int32_t id, std::int64_t vocab) {
  if (id < 0 || id >= vocab)
    args.fail(fmt::format("id {} is outside the vocabulary [0, {})", id, vocab));
  return id;
}

}  // namespace

void embedding(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& table = args.f32(0);
  const Tensor& ids = args.i32(1);
  if (table.rank() != 2) args.fail("table must be [V, h], got " + table.typeText());
  std::int64_t vocab = table.dim(0), h = table.dim(1);
  Shape yShape = ids.shape();
  yShape.push_back(h);
  Tensor& y = args.outF32(0, yShape);
  const float* rows = table.f32().data();
  float* out = y.f32().data();
  auto idValues = ids.i32();
  for (std::size_t p = 0; p < idValues.size(); ++p) {
    const float* row = rows + checkedId(args, idValues[p], vocab) * h;
    std::copy(row, row + h, out + static_cast<std::int64_t>(p) * h);
  }
}

void embeddingGrad(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& ids = args.i32(0);
  const Tensor& dy = args.f32(1);
  if (dy.rank() != ids.rank() + 1 ||
      !std::equal(ids.shape().begin(), ids.shape().end(), dy.shape().begin()))
    args.fail(fmt::format("dy {} does not match ids {}", dy.typeText(), ids.typeText()));
  std::int64_t h = dy.dim(-1);
  // The vocabulary comes from the attribute, or from a preallocated output.
  std::int64_t vocab = args.rawOut(0).allocated() && !args.hasAttr("vocab") ? args.rawOut(0).dim(0)
                                                                            : args.intAttr("vocab");
  Tensor& dtable = args.outF32(0, {vocab, h});
  std::fill(dtable.f32().begin(), dtable.f32().end(), 0.0f);
  float* table = dtable.f32().data();
  const float* grads = dy.f32().data();
  auto idValues = ids.i32();
  // Positions are added in order, so a repeated id always sums the same way.
  for (std::size_t p = 0; p < idValues.size(); ++p) {
    float* row = table + checkedId(args, idValues[p], vocab) * h;
    const float* g = grads + static_cast<std::int64_t>(p) * h;
    for (std::int64_t j = 0; j < h; ++j) row[j] += g[j];
  }
}

}  // namespace meshflow::runtime::cpu
