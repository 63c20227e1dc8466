// test_cuda_ops' checks of the fused groups (FusedParity.cpp).
#pragma once

#include <memory>

#include "tests/gpu/Parity.h"

namespace meshflow::runtime {
class DeviceMemory;
}
namespace meshflow::runtime::cuda {
class CudaKernels;
}

namespace meshflow::gpu_check {

/// Each fused pattern in f32, bf16 and f16 through `kernels` on tensors of
/// `memory`: against the cpu chain (tolerance) and the GPU chain (bits).
void checkFusedGroups(cuda::CudaKernels& kernels,
                      const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory);

}  // namespace meshflow::gpu_check
