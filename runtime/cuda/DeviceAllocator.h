// GPU memory under the accounting of runtime/memory/DeviceMemory.h: the same
// caching allocator (size classes, freed blocks kept for reuse, peak by
// category, the device's limit enforced with an error naming the device, the
// bytes and what is held), with its blocks from cudaMalloc.
//
// Without `managed`, the DeviceMemory this returns hands out device pointers:
// it must never be put in a MemoryScope, whose tensors are host tensors.
#pragma once

#include <cstdint>
#include <memory>

#include "runtime/memory/DeviceMemory.h"

namespace meshflow::runtime::cuda {

/// Blocks from cudaMalloc on `device` (cudaMallocManaged with `managed`:
/// memory the host can read and write too), given back with cudaFree. allocate()
/// answers null when the GPU is out of memory (DeviceMemory then frees its
/// cache and tries once more); any other CUDA error throws CudaError. free()
/// never throws (it runs in destructors, possibly at exit).
class CudaBlocks final : public BlockSource {
 public:
  /// `index`: the CUDA device (cudaSetDevice's number).
  explicit CudaBlocks(int index, bool managed = false);
  void* allocate(std::size_t bytes) override;
  void free(void* data, std::size_t bytes) noexcept override;
  std::string name() const override;

 private:
  int index_;
  bool managed_;
  std::string name_;
};

/// The memory of meshflow device `device` on CUDA device `index`, limited to
/// `limit` bytes (0: the GPU's own size is the limit). Throws CudaError
/// unless CUDA device `index` exists. With `managed`, CUDA managed memory,
/// which a MemoryScope may hold (its tensors are host tensors too): what the
/// cuda backend's devices allocate from (CudaHost.h).
std::shared_ptr<DeviceMemory> makeDeviceMemory(int device, int index, std::int64_t limit, bool managed = false);

}  // namespace meshflow::runtime::cuda
