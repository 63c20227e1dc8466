// The arithmetic and copies of the in-process communicator's collectives
// (LocalCluster.h) as ops on the calling thread's kernels, for device threads
// that have a backend of their own (a KernelScope: the cuda backend's virtual
// devices on one GPU). Their tensors then stay in the device's memory, summed
// and moved by its kernels, instead of being read and written by the host.
// The results are the host path's bits: sums in group order, one rounding per
// addition (f32 adds; half types widened, added in f32 and rounded, as the
// host adds them), slices and concatenations as copies. Each function waits
// for its ops before it returns, inside a KernelBatch too: they read the other
// members' tensors, which those may free once the collective is over.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/Tensor.h"

namespace meshflow::runtime::cpu {

/// Whether the collectives of this thread run on its kernels: a device
/// backend is in scope and the operands are floats (i32 sums wrap on the host).
bool collectivesOnKernels(const std::vector<const Tensor*>& inputs);

/// ((x0 + x1) + x2) + ... of whole tensors.
Tensor kernelSum(const std::vector<const Tensor*>& inputs);
/// Slice `part` of `parts` equal slices along axis 0 of each input, summed in order.
Tensor kernelSliceSum(const std::vector<const Tensor*>& inputs, std::size_t part, std::size_t parts);
/// The inputs concatenated along axis 0.
Tensor kernelConcat(const std::vector<const Tensor*>& inputs);
/// Slice `part` of `parts` of each input, concatenated along axis 0.
Tensor kernelExchange(const std::vector<const Tensor*>& inputs, std::size_t part, std::size_t parts);

}  // namespace meshflow::runtime::cpu
