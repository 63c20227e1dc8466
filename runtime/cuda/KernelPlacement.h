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
/// MatMul with both operands f32, bf16 or f16 (one type; an f32 result of half
/// operands too: a half model's weight gradients); casts between two
/// float types; the layout ops (transpose, concat, split, the heads' layout)
/// of any element type; the element-wise ops (broadcasting up to rank 8),
/// their gradients, dropout, the causal mask, softmax, layer norm,
/// cross-entropy, embedding (and their backwards), the sums (Sum, Mean,
/// ReduceToShape) and BroadcastTo, GlobalNorm and the SGD and Adam updates, on
/// f32 or f16/bf16 operands (i32 ids and labels): read as stored or widened
/// to f32 copies, as OperandPath.h decides. kHost for the rest: reshapes (they copy nothing),
/// constants, scalar bookkeeping (ClipScale, LossScaleUpdate), MoE routing,
/// an update whose step an overflow skips, and tensors of rank over 8.
Placement placementOf(const ir::Op& op, const std::vector<const Tensor*>& inputs,
                      const std::vector<Tensor*>& outputs = {});

}  // namespace meshflow::runtime::cuda
