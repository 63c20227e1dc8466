// Row slices and concatenations of f32 tensors, and each device's own input:
// what the communicator tests (the cpu backend's and NCCL's) compare
// collectives' results with.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/Tensor.h"

namespace meshflow::test_rows {

using runtime::Shape;
using runtime::Tensor;

/// Rows [begin, begin + count) of an f32 tensor.
inline Tensor rows(const Tensor& t, std::int64_t begin, std::int64_t count) {
  Shape shape = t.shape();
  const std::int64_t width = t.elements() / shape[0];
  shape[0] = count;
  auto values = t.f32().subspan(static_cast<std::size_t>(begin * width), static_cast<std::size_t>(count * width));
  return Tensor::fromF32(shape, {values.begin(), values.end()});
}

/// The parts' rows one after another.
inline Tensor concatRows(const std::vector<Tensor>& parts) {
  Shape shape = parts[0].shape();
  shape[0] = 0;
  std::vector<float> values;
  for (const auto& part : parts) {
    shape[0] += part.dim(0);
    values.insert(values.end(), part.f32().begin(), part.f32().end());
  }
  return Tensor::fromF32(shape, values);
}

/// Each device's own input: distinct, reproducible values.
inline Tensor inputOf(int device, Shape shape) { return runtime::randomNormal(std::move(shape), 100 + device); }

}  // namespace meshflow::test_rows
