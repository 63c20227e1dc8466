// How the cuda backend's kernels read an op's float operands: as they are
// stored, or widened. Pure host-side logic (which path an op takes), decided
// before the launch and unit-tested without a GPU (tests/unit/cuda).
#pragma once

#include <vector>

#include "ir/Graph.h"
#include "runtime/Tensor.h"

namespace meshflow::runtime::cuda {

/// kAsStored: the op's kernels read and write its operands in their own
/// types — f32, or f16/bf16 elements read as f32, computed on in f32 (or
/// double, where the f32 kernel accumulates in double) and each result
/// rounded once to its tensor's type: the bits the widened path gives, in one
/// pass over memory and with no f32 copies. kWidened: f32 copies of the half
/// operands around the f32 kernel, each result rounded back (cpu::runWidened
/// on the GPU): three passes over memory and copies that raise the peak.
enum class OperandPath { kAsStored, kWidened };

/// The path of an op placementOf puts on the GPU. As stored: anything without
/// a half operand; matmuls, casts and the layout ops (they take any float
/// type); and, with half operands —
/// - element-wise ops, their gradients, dropout, the causal mask, softmax and
///   its gradient, layer norm: every input of one half type, typed outputs of it;
/// - layer norm's backward: x, gamma and dy of one half type, dx of it, dgamma
///   and dbeta of it or f32 (a half model's parameter gradients);
/// - cross-entropy and its gradient on half logits (f32 loss and dloss);
/// - embedding of a half table, and its gradient from any float dy into any
///   float table;
/// - the sums (Sum, Mean, ReduceToShape) from any float type into any float type;
/// - BroadcastTo of a half tensor into its type (a copy);
/// - GlobalNorm of any float tensors;
/// - SGD and Adam/AdamW updates whose weight, gradient and state are each of
///   any float type (in a training graph all are f32: the update runs on the
///   f32 master weight, docs/autodiff.md), with an f32 scale and outputs
///   typed as floats (an untyped one gets the weight's type, as the cpu
///   kernels give it).
/// Widened: any other mix (say an Add of bf16 and f32).
OperandPath operandPathOf(const ir::Op& op, const std::vector<const Tensor*>& inputs,
                          const std::vector<Tensor*>& outputs);

}  // namespace meshflow::runtime::cuda
