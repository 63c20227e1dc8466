#include "runtime/memory/DeviceMemory.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <new>

#include "ir/Bytes.h"

namespace meshflow::runtime {
namespace {

constexpr std::align_val_t kAlignment{64};

// Blocks come in size classes so that a freed block serves the next request
// of about its size: multiples of 64 bytes up to 4 KiB, then four classes per
// power of two (at most 25% more than asked).
std::size_t sizeClass(std::size_t bytes) {
  if (bytes <= 4096) return std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
  const std::size_t step = std::bit_floor(bytes) / 4;
  return (bytes + step - 1) / step * step;
}

class HostBlocks final : public BlockSource {
 public:
  void* allocate(std::size_t bytes) override { return ::operator new(bytes, kAlignment, std::nothrow); }
  void free(void* data, std::size_t) override { ::operator delete(data, kAlignment); }
  std::string name() const override { return "host"; }
};

thread_local std::shared_ptr<DeviceMemory> tCurrent;
thread_local MemoryCategory tCategory = MemoryCategory::kActivations;

}  // namespace

const char* memoryCategoryName(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kGradients:
      return "gradients";
    case MemoryCategory::kOptimizerState:
      return "optimizer state";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kCommunication:
      return "communication";
  }
  return "?";
}

void BlockSource::copyToHost(void* host, const void* block, std::size_t bytes) { std::memcpy(host, block, bytes); }
void BlockSource::copyFromHost(void* block, const void* host, std::size_t bytes) { std::memcpy(block, host, bytes); }
void BlockSource::copyBlocks(void* to, const void* from, std::size_t bytes) { std::memcpy(to, from, bytes); }

bool DeviceMemory::canHandBlocksTo(const DeviceMemory& other) const {
  if (hostVisible() && other.hostVisible()) return true;
  return hostVisible() == other.hostVisible() && source_->place() == other.source_->place();
}

// One convention for bytes in every table and message (ir::formatBytes).
std::string bytesText(double bytes) { return ir::formatBytes(bytes); }

DeviceMemory::DeviceMemory(int device, std::int64_t limit, std::unique_ptr<BlockSource> source)
    : device_(device),
      source_(source ? std::move(source) : std::make_unique<HostBlocks>()),
      limit_(limit) {}

DeviceMemory::~DeviceMemory() { emptyCache(); }

void DeviceMemory::chargeLocked(std::size_t bytes, MemoryCategory category) {
  const auto n = static_cast<std::int64_t>(bytes);
  if (limit_ > 0 && allocated_ + n > limit_) {
    std::string held;
    for (std::size_t c = 0; c < kMemoryCategories; ++c)
      if (held_[c] > 0)
        held += fmt::format("{}{} {}", held.empty() ? "" : ", ",
                            memoryCategoryName(static_cast<MemoryCategory>(c)),
                            bytesText(double(held_[c])));
    throw DeviceMemoryError(fmt::format(
        "out of memory on device {}: {} more for {} would hold {} of its {} ({})", device_,
        bytesText(double(n)), memoryCategoryName(category), bytesText(double(allocated_ + n)),
        bytesText(double(limit_)), held.empty() ? "nothing held yet" : "holding " + held));
  }
  allocated_ += n;
  held_[static_cast<std::size_t>(category)] += n;
  if (allocated_ > peak_) {
    peak_ = allocated_;
    peakBreakdown_ = held_;
  }
}

DeviceMemory::Block DeviceMemory::allocate(std::size_t bytes, MemoryCategory category) {
  const std::size_t capacity = sizeClass(bytes);
  {
    std::lock_guard lock(mutex_);
    chargeLocked(bytes, category);
    ++allocations_;
    auto it = cache_.find(capacity);
    if (it != cache_.end() && !it->second.empty()) {
      void* data = it->second.back();
      it->second.pop_back();
      cachedBytes_ -= static_cast<std::int64_t>(capacity);
      ++reused_;
      return {data, capacity};
    }
  }
  return {allocateFromSource(capacity, bytes, category), capacity};
}

// The bytes are charged already; a failure uncharges them. Blocks cached in
// other size classes go back to the source before the request fails, as a
// GPU caching allocator does when cudaMalloc runs out. A source that throws
// (a CUDA error other than out-of-memory) leaves the accounting as it was.
void* DeviceMemory::allocateFromSource(std::size_t capacity, std::size_t bytes, MemoryCategory category) {
  auto uncharge = [&] {
    std::lock_guard lock(mutex_);
    allocated_ -= static_cast<std::int64_t>(bytes);
    held_[static_cast<std::size_t>(category)] -= static_cast<std::int64_t>(bytes);
  };
  void* data = nullptr;
  try {
    data = source_->allocate(capacity);
    if (data == nullptr) {
      emptyCache();
      data = source_->allocate(capacity);
    }
  } catch (...) {
    uncharge();
    throw;
  }
  if (data != nullptr) return data;
  uncharge();
  throw DeviceMemoryError(fmt::format("out of {} memory on device {}: {} for {}", source_->name(), device_,
                                      bytesText(double(bytes)), memoryCategoryName(category)));
}

void DeviceMemory::release(Block block, std::size_t bytes, MemoryCategory category) {
  std::lock_guard lock(mutex_);
  allocated_ -= static_cast<std::int64_t>(bytes);
  held_[static_cast<std::size_t>(category)] -= static_cast<std::int64_t>(bytes);
  cache_[block.capacity].push_back(block.data);
  cachedBytes_ += static_cast<std::int64_t>(block.capacity);
}

void DeviceMemory::recharge(std::size_t bytes, MemoryCategory from, MemoryCategory to) {
  std::lock_guard lock(mutex_);
  held_[static_cast<std::size_t>(from)] -= static_cast<std::int64_t>(bytes);
  held_[static_cast<std::size_t>(to)] += static_cast<std::int64_t>(bytes);
}

void DeviceMemory::disown(std::size_t bytes, MemoryCategory category) {
  std::lock_guard lock(mutex_);
  allocated_ -= static_cast<std::int64_t>(bytes);
  held_[static_cast<std::size_t>(category)] -= static_cast<std::int64_t>(bytes);
}

void DeviceMemory::adopt(std::size_t bytes, MemoryCategory category) {
  std::lock_guard lock(mutex_);
  chargeLocked(bytes, category);
}

MemoryStats DeviceMemory::stats() const {
  std::lock_guard lock(mutex_);
  return {allocated_, peak_, peakBreakdown_, cachedBytes_, allocations_, reused_};
}

void DeviceMemory::resetPeak() {
  std::lock_guard lock(mutex_);
  peak_ = allocated_;
  peakBreakdown_ = held_;
  allocations_ = reused_ = 0;
}

void DeviceMemory::emptyCache() {
  std::lock_guard lock(mutex_);
  for (auto& [capacity, blocks] : cache_)
    for (void* data : blocks) source_->free(data, capacity);
  cache_.clear();
  cachedBytes_ = 0;
}

MemoryScope::MemoryScope(std::shared_ptr<DeviceMemory> memory, MemoryCategory category)
    : previous_(std::move(tCurrent)), previousCategory_(tCategory) {
  tCurrent = std::move(memory);
  tCategory = category;
}

MemoryScope::MemoryScope(MemoryCategory category)
    : previous_(tCurrent), previousCategory_(tCategory) {
  tCategory = category;
}

MemoryScope::~MemoryScope() {
  tCurrent = std::move(previous_);
  tCategory = previousCategory_;
}

const std::shared_ptr<DeviceMemory>& MemoryScope::current() { return tCurrent; }
MemoryCategory MemoryScope::currentCategory() { return tCategory; }

}  // namespace meshflow::runtime
