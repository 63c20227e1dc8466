// What the cuda backend says about a run when it ends, on stderr: per device,
// how many ops ran on the GPU and on the host (MESHFLOW_CUDA_OPS=1), and the
// op kinds (matmuls by their operands) that took the most time (MESHFLOW_CUDA_PROFILE=1, docs/gpu.md).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace meshflow::runtime::cuda {

class CudaKernels;

/// With MESHFLOW_CUDA_OPS set: which transport `device` talks through and why.
void reportTransport(int device, const std::string& choice);

/// Prints the reports the environment asks for, for each (device, its kernels).
void reportDevices(const std::vector<std::pair<int, const CudaKernels*>>& devices);

}  // namespace meshflow::runtime::cuda
