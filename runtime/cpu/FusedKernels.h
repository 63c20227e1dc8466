// The reference of a fused group's computation (runtime/FusedOps.h) on the
// host: one pass per row or element, each intermediate rounded to the
// operands' float type as the unfused chain's ops round their results, so
// it gives the chain's bits (f32, f16 and bf16). The cuda backend's fused
// kernels compute the same; tests compare both against the unfused chain.
#pragma once

#include <optional>
#include <vector>

#include "runtime/FusedOps.h"
#include "runtime/Tensor.h"

namespace meshflow::runtime::cpu {

/// Whether `group` can run fused on these operands: every input and output of
/// one float type, the shapes the pattern needs (kSoftmax and kSoftmaxGrad:
/// [..., s, s] when causal, y and dy of one shape; kBiasGelu: the bias a
/// vector of x's last dimension). Otherwise the caller runs the ops one by
/// one, whose kernels name what is wrong.
bool fusable(const FusedGroup& group, const std::vector<const Tensor*>& inputs);

/// The shape an element-wise chain computes (its first op's result); none
/// for a chain of no steps, too many, or operands that do not broadcast.
std::optional<Shape> fusedChainShape(const FusedGroup& group,
                                     const std::vector<const Tensor*>& inputs);

/// Runs `group` on `inputs` into `outputs` (one per group output; null for
/// one nobody reads). Requires fusable().
void runFused(const FusedGroup& group, const std::vector<const Tensor*>& inputs,
              std::vector<Tensor*>& outputs);

}  // namespace meshflow::runtime::cpu
