// Which ops the cuda backend runs on the GPU and which it leaves to the cpu
// kernels on the host (on the same managed memory, after the device's stream
// has finished): pure host-side logic, unit-tested without a GPU.
#pragma once

#include <vector>

#include "ir/Graph.h"
#include "runtime/Tensor.h"

namespace meshflow::runtime::cuda {

enum class Placement { kGpu, kHost };

/// kGpu for the ops CudaKernels has a kernel for, with operands it takes:
/// MatMul with both operands f32, bf16 or f16 (one type); the element-wise
/// ops (broadcasting up to rank 8), their gradients, dropout, the causal mask,
/// softmax, layer norm, cross-entropy, embedding (and their backwards),
/// ReduceToShape onto a trailing part of dy's shape, GlobalNorm and the SGD
/// and Adam updates, all on f32 (i32 ids and labels). kHost for the rest:
/// shape ops that copy nothing (Reshape) or little, constants, scalar
/// bookkeeping (ClipScale, LossScaleUpdate), casts, MoE routing, other reductions,
/// and any op with a half-precision operand other than MatMul's — an input,
/// or an output whose dtype the caller fixed (a placeholder or an allocated
/// tensor): the cpu kernels widen those and round once (HalfPrecision.cpp).
Placement placementOf(const ir::Op& op, const std::vector<const Tensor*>& inputs,
                      const std::vector<Tensor*>& outputs = {});

}  // namespace meshflow::runtime::cuda
