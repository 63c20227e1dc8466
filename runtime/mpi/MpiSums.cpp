// Element ranges and deterministic sums of the MPI transport, as the cpu
// backend's LocalCluster.cpp computes them (compiled with -ffp-contract=off:
// runtime/mpi/CMakeLists.txt).
#include "runtime/mpi/MpiSums.h"

#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "runtime/HalfFloat.h"

namespace meshflow::runtime::mpi {

// to[i] = a[i] + b[i] for one dtype, rounding half sums once per addition as
// the cpu backend does; i32 wraps modulo 2^32.
void addInto(ir::DType dtype, const std::byte* a, const std::byte* b, std::byte* to,
             std::size_t count) {
  switch (dtype) {
    case ir::DType::F32: {
      auto* x = reinterpret_cast<const float*>(a);
      auto* y = reinterpret_cast<const float*>(b);
      auto* z = reinterpret_cast<float*>(to);
      for (std::size_t i = 0; i < count; ++i) z[i] = x[i] + y[i];
      return;
    }
    case ir::DType::BF16: {
      auto* x = reinterpret_cast<const BFloat16*>(a);
      auto* y = reinterpret_cast<const BFloat16*>(b);
      auto* z = reinterpret_cast<BFloat16*>(to);
      for (std::size_t i = 0; i < count; ++i)
        z[i] = toBFloat16(fromBFloat16(x[i]) + fromBFloat16(y[i]));
      return;
    }
    case ir::DType::F16: {
      auto* x = reinterpret_cast<const Half*>(a);
      auto* y = reinterpret_cast<const Half*>(b);
      auto* z = reinterpret_cast<Half*>(to);
      for (std::size_t i = 0; i < count; ++i) z[i] = toHalf(fromHalf(x[i]) + fromHalf(y[i]));
      return;
    }
    case ir::DType::I32: {
      auto* x = reinterpret_cast<const std::int32_t*>(a);
      auto* y = reinterpret_cast<const std::int32_t*>(b);
      auto* z = reinterpret_cast<std::int32_t*>(to);
      for (std::size_t i = 0; i < count; ++i)
        z[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(x[i]) +
                                         static_cast<std::uint32_t>(y[i]));
      return;
    }
    default:
      throw std::logic_error(fmt::format("no sum of {} tensors", ir::dtypeName(dtype)));
  }
}

// to = ((x0 + x1) + x2) + ... over `inputs` in order: the cpu backend's
// orderedSum, element by element.
void orderedSum(ir::DType dtype, const std::vector<const std::byte*>& inputs, std::byte* to,
                std::size_t count) {
  if (count == 0) return;
  if (inputs.size() == 1) {
    std::memcpy(to, inputs[0], count * ir::dtypeBytes(dtype));
    return;
  }
  addInto(dtype, inputs[0], inputs[1], to, count);
  for (std::size_t k = 2; k < inputs.size(); ++k) addInto(dtype, to, inputs[k], to, count);
}

// The first element of chunk k of n over `elements` (chunk sizes differ by at most one).
std::size_t chunkStart(std::size_t elements, std::size_t k, std::size_t n) {
  return elements * k / n;
}

Shape sliceShape(Shape shape, std::size_t parts) {
  shape[0] /= static_cast<std::int64_t>(parts);
  return shape;
}

}  // namespace meshflow::runtime::mpi
