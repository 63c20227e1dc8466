// One device's memory: an accounting, caching allocator for the tensors a
// device holds (docs/runtime.md, "Device memory").
//
// Every tensor a device's thread allocates while a MemoryScope names the device
// comes from its DeviceMemory, which counts the bytes by category (parameters,
// gradients, optimizer state, activations, communication), remembers the peak
// with its breakdown, enforces the device's limit with an error that names the
// bytes and what holds them, and keeps freed blocks for reuse instead of handing
// them back to the system (a GPU caching allocator's reason: a step allocates
// the same sizes again, and fresh pages cost page faults).
//
// Tensors keep their DeviceMemory alive (shared_ptr), so a tensor may outlive
// the trainer that made it. Allocation and release are thread-safe: a message
// allocated by one device may be freed by another.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace meshflow::runtime {

enum class MemoryCategory : std::uint8_t {
  kParameters,
  kGradients,
  kOptimizerState,
  kActivations,
  kCommunication
};
constexpr std::size_t kMemoryCategories = 5;

/// "parameters", "gradients", "optimizer state", "activations", "communication".
const char* memoryCategoryName(MemoryCategory category);

/// Bytes per category.
using MemoryBreakdown = std::array<std::int64_t, kMemoryCategories>;

struct MemoryStats {
  std::int64_t allocated = 0;       ///< Bytes tensors hold now.
  std::int64_t peak = 0;            ///< The most they held since the last resetPeak().
  MemoryBreakdown peakBreakdown{};  ///< By category, at that peak.
  std::int64_t cached = 0;          ///< Freed bytes kept for reuse.
  std::int64_t allocations = 0;     ///< Blocks handed out since the last resetPeak() ...
  std::int64_t reused = 0;          ///< ... of which from the cache.
};

/// An allocation beyond the device's limit. what() names the device, the bytes
/// asked for and what the device holds, by category.
class DeviceMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bytes in binary units, three significant digits: "1.5 MiB" (ir::formatBytes).
std::string bytesText(double bytes);

/// Where a DeviceMemory's blocks come from: the host's heap by default; the
/// cuda backend passes one over cudaMalloc (runtime/cuda/DeviceAllocator.h),
/// so both backends share one accounting. The tests pass fakes.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  /// A block of `bytes`, or null when the memory has no more.
  virtual void* allocate(std::size_t bytes) = 0;
  /// Gives back a block of allocate(bytes).
  virtual void free(void* data, std::size_t bytes) = 0;
  /// The memory in an error message: "host", "CUDA device 0 (NVIDIA H100)".
  virtual std::string name() const = 0;

  /// Whether the host reads and writes the blocks directly (the heap, CUDA
  /// managed memory). Tensors in memory it cannot (cudaMalloc's) keep a host
  /// copy that their views read and write, copied on demand (Tensor.h).
  virtual bool hostVisible() const { return true; }
  /// Where the blocks are (-1: the host; a GPU's index): a block may change
  /// owner (DeviceMemory::adopt) only between memories of one place, unless
  /// both are host-visible.
  virtual int place() const { return -1; }
  /// Copies to the host, from the host, and between blocks (of this source
  /// or another one's, `to` being this source's), in order with the work the
  /// device has queued on them, and returns once done.
  virtual void copyToHost(void* host, const void* block, std::size_t bytes);
  virtual void copyFromHost(void* block, const void* host, std::size_t bytes);
  virtual void copyBlocks(void* to, const void* from, std::size_t bytes);
  /// Tests: fill a copy with 0xFF bytes (NaN as f32) once the other one is
  /// written, so that a stale copy read by mistake shows in the results.
  /// Only for blocks the host can address.
  virtual bool poisonsStaleCopies() const { return false; }
};

class DeviceMemory {
 public:
  /// `limit` 0: unlimited. `source` null: the host's heap, 64-byte aligned.
  DeviceMemory(int device, std::int64_t limit, std::unique_ptr<BlockSource> source = nullptr);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  struct Block {
    void* data = nullptr;
    std::size_t capacity = 0;  ///< The block's size class, >= the bytes asked for.
  };
  /// A block of at least `bytes`, charged to `category`; throws DeviceMemoryError
  /// past the limit, or when the source has no block even after the cache is
  /// given back to it.
  Block allocate(std::size_t bytes, MemoryCategory category);
  /// Gives back a block of allocate(bytes, category) for reuse.
  void release(Block block, std::size_t bytes, MemoryCategory category);
  /// Moves `bytes` held under `from` to `to`.
  void recharge(std::size_t bytes, MemoryCategory from, MemoryCategory to);
  /// A block moving between devices (a message another device allocated):
  /// the sender disowns it, the receiver adopts it, checked against its limit,
  /// and caches it when it is released.
  void disown(std::size_t bytes, MemoryCategory category);
  void adopt(std::size_t bytes, MemoryCategory category);

  int device() const { return device_; }
  std::int64_t limit() const { return limit_; }
  /// Where the blocks come from (copies, and whether the host sees them).
  BlockSource& blocks() const { return *source_; }
  bool hostVisible() const { return source_->hostVisible(); }
  /// Whether a block of this memory may become `other`'s without a copy.
  bool canHandBlocksTo(const DeviceMemory& other) const;
  MemoryStats stats() const;
  /// Starts a new peak (and allocation counts) from what is held now.
  void resetPeak();
  /// Frees the cached blocks.
  void emptyCache();

 private:
  void chargeLocked(std::size_t bytes, MemoryCategory category);
  void* allocateFromSource(std::size_t capacity, std::size_t bytes, MemoryCategory category);

  const int device_;
  const std::unique_ptr<BlockSource> source_;
  const std::int64_t limit_;
  mutable std::mutex mutex_;
  MemoryBreakdown held_{};
  std::int64_t allocated_ = 0;
  std::int64_t peak_ = 0;
  MemoryBreakdown peakBreakdown_{};
  std::int64_t cachedBytes_ = 0;
  std::int64_t allocations_ = 0, reused_ = 0;
  std::map<std::size_t, std::vector<void*>> cache_;  // by size class
};

/// While alive, tensors this thread allocates come from `memory` under
/// `category` (null: from the plain heap, uncounted); restores the previous
/// scope when it ends.
class MemoryScope {
 public:
  MemoryScope(std::shared_ptr<DeviceMemory> memory, MemoryCategory category);
  /// The same device, another category.
  explicit MemoryScope(MemoryCategory category);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

  /// The memory and category of this thread's innermost scope.
  static const std::shared_ptr<DeviceMemory>& current();
  static MemoryCategory currentCategory();

 private:
  std::shared_ptr<DeviceMemory> previous_;
  MemoryCategory previousCategory_;
};

}  // namespace meshflow::runtime
