// GPU memory under the accounting of runtime/memory/DeviceMemory.h: the same
// caching allocator (size classes, freed blocks kept for reuse, peak by
// category, the device's limit enforced with an error naming the device, the
// bytes and what is held), with its blocks from cudaMalloc.
//
// Without `managed`, the blocks are device memory the host cannot address:
// tensors in it keep a host copy for their views (Tensor.h), which the
// copies below keep up to date.
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
  bool hostVisible() const override { return managed_; }
  int place() const override { return index_; }
  /// cudaMemcpy after every stream of the GPU is done (a block may be
  /// rewritten or read by queued kernels), then once more after the copy: a
  /// copy from pageable memory may still be under way when cudaMemcpy returns.
  void copyToHost(void* host, const void* block, std::size_t bytes) override;
  void copyFromHost(void* block, const void* host, std::size_t bytes) override;
  void copyBlocks(void* to, const void* from, std::size_t bytes) override;

 private:
  int index_;
  bool managed_;
  std::string name_;
};

/// The memory of meshflow device `device` on CUDA device `index`, limited to
/// `limit` bytes (0: the GPU's own size is the limit). Throws CudaError
/// unless CUDA device `index` exists. With `managed`, CUDA managed memory
/// (the host reads and writes it in place), else device memory.
std::shared_ptr<DeviceMemory> makeDeviceMemory(int device, int index, std::int64_t limit, bool managed = false);

}  // namespace meshflow::runtime::cuda
