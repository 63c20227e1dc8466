// The host-side argument checks of Kernels.h's launchers.
#include <fmt/format.h>

#include <stdexcept>

#include "runtime/cuda/Kernels.h"

namespace meshflow::runtime::cuda::detail {

void checkElementwise(const char* kernel, std::int64_t n, std::int64_t nb) {
  if (n < 0) throw std::invalid_argument(fmt::format("cuda::{}: negative element count {}", kernel, n));
  if (nb < 1 && n > 0)
    throw std::invalid_argument(fmt::format("cuda::{}: the second operand has {} elements", kernel, nb));
  if (n > 0 && n % nb != 0)
    throw std::invalid_argument(
        fmt::format("cuda::{}: the second operand's {} elements do not repeat over {}", kernel, nb, n));
}

void checkRows(const char* kernel, std::int64_t rows, std::int64_t width, bool causal) {
  if (rows < 0 || width < 0)
    throw std::invalid_argument(fmt::format("cuda::{}: negative rows ({}) or width ({})", kernel, rows, width));
  if (rows > 0 && width == 0)
    throw std::invalid_argument(fmt::format("cuda::{}: {} rows of width 0", kernel, rows));
  if (causal && width > 0 && rows % width != 0)
    throw std::invalid_argument(fmt::format(
        "cuda::{}: a causal mask needs [..., s, s] scores, got {} rows of width {}", kernel, rows, width));
}

void checkPointers(const char* kernel, std::int64_t n, std::initializer_list<const void*> pointers) {
  if (n == 0) return;
  for (const void* p : pointers)
    if (p == nullptr) throw std::invalid_argument(fmt::format("cuda::{}: a null device pointer", kernel));
}

}  // namespace meshflow::runtime::cuda::detail
