// Which GPU each virtual device of a cuda(devices = N) cluster runs on: pure
// host-side logic, unit-tested without a GPU.
#pragma once

#include <vector>

namespace meshflow::runtime::cuda {

/// GPU index per virtual device: N devices on G GPUs in G contiguous blocks
/// (device d on GPU d · G / N), so neighbours (a mesh, adjacent pipeline
/// stages) share a GPU when there are fewer GPUs than devices; one each when
/// there are as many; the first N when there are more. Throws
/// std::invalid_argument for N < 1 or G < 1.
std::vector<int> gpuOfDevices(int devices, int gpus);

/// The GPU of a job's process (one process per device under mpirun or srun):
/// its rank among the job's processes on this machine modulo the GPUs it
/// sees, so one process a GPU when there are as many, and processes sharing
/// GPUs in turn when there are more. Throws std::invalid_argument for a
/// negative local rank or fewer than one GPU.
int gpuOfLocalRank(int localRank, int gpus);

}  // namespace meshflow::runtime::cuda
