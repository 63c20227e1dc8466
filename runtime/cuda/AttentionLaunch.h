// How CudaKernels runs a fused attention (KernelBackend::attention,
// attentionGrad) with AttentionKernels.h: which calls the kernels take, and
// the launches with their outputs allocated from the thread's MemoryScope.
#pragma once

#include <optional>

#include "runtime/Tensor.h"
#include "runtime/cpu/FusedAttention.h"
#include "runtime/cuda/AttentionKernels.h"

namespace meshflow::runtime::cuda {

/// The kernels' sizes for cpu::fusedAttention(q, k, v, options), or none where
/// they do not take it: operands cpu::fusedAttention rejects (it then names
/// them on the host) or a head dimension over kMaxAttentionHeadDim.
std::optional<AttentionSizes> attentionSizes(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const cpu::AttentionOptions& options);
/// The same for the backward: also none unless dOut has q's shape and dtype and
/// lse is f32 of q's shape less its last dimension.
std::optional<AttentionSizes> attentionGradSizes(const Tensor& q, const Tensor& k, const Tensor& v,
                                                 const Tensor& dOut, const Tensor& lse,
                                                 const cpu::AttentionOptions& options);

/// Enqueues the forward on `stream` (operands in memory the GPU reads);
/// allocates result's out and lse.
void launchAttention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSizes& sizes,
                     cpu::AttentionResult& result, Stream stream);
/// Enqueues the backward; allocates grads' dq, dk, dv and the row term's scratch.
void launchAttentionGrad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dOut, const Tensor& lse,
                         const AttentionSizes& sizes, cpu::AttentionGrads& grads, Stream stream);

}  // namespace meshflow::runtime::cuda
