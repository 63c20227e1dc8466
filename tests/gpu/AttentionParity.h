// test_cuda_ops' checks of the fused attention kernels (AttentionParity.cpp).
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

/// CudaKernels::attention and attentionGrad in f32, bf16 and f16 on tensors
/// of `memory`: against cpu::fusedAttention and fusedAttentionGrad
/// (tolerance), and against a second run (bits); a head dimension over the
/// kernels' bound left to the host.
void checkFusedAttention(cuda::CudaKernels& kernels, const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory);

}  // namespace meshflow::gpu_check
