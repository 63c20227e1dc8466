// How long an element-wise chain (runtime/FusedOps.h) may be: the bounds of
// the fixed arrays the GPU's chain kernel takes by value. Plain C++17: nvcc
// compiles the kernels that include it.
#pragma once

#include <cstddef>

namespace meshflow::runtime {

/// At most this many ops and this many distinct operands in an element-wise chain.
constexpr std::size_t kMaxChainSteps = 8;
constexpr std::size_t kMaxChainInputs = 8;

}  // namespace meshflow::runtime
