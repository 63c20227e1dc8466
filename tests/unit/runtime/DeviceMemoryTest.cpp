// A device's accounting, caching allocator (runtime/memory/DeviceMemory.h) and
// the tensors that draw from it.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>

#include "runtime/Tensor.h"
#include "runtime/memory/DeviceMemory.h"

using namespace meshflow::runtime;

namespace {

std::int64_t held(const DeviceMemory& memory, MemoryCategory category) {
  // The breakdown at a fresh peak is what is held now.
  return memory.stats().peakBreakdown[static_cast<std::size_t>(category)];
}

}  // namespace

TEST_CASE("tensors allocated in a scope are counted by category until freed", "[runtime][memory]") {
  auto memory = std::make_shared<DeviceMemory>(3, 0);
  {
    MemoryScope scope(memory, MemoryCategory::kParameters);
    Tensor w = Tensor::zeros({256});  // 1 KiB
    CHECK(w.memory() == memory.get());
    CHECK(memory->stats().allocated == 1024);
    {
      MemoryScope activations(MemoryCategory::kActivations);
      Tensor a = Tensor::uninitialized(meshflow::ir::DType::F32, {512});  // 2 KiB
      CHECK(memory->stats().allocated == 3072);
      CHECK(memory->stats().peak == 3072);
      CHECK(held(*memory, MemoryCategory::kActivations) == 2048);
      CHECK(held(*memory, MemoryCategory::kParameters) == 1024);
    }
    CHECK(memory->stats().allocated == 1024);
    CHECK(memory->stats().peak == 3072);  // the peak stays until reset
    memory->resetPeak();
    CHECK(memory->stats().peak == 1024);
    w.chargeTo(MemoryCategory::kGradients);
    memory->resetPeak();
    CHECK(held(*memory, MemoryCategory::kGradients) == 1024);
    CHECK(held(*memory, MemoryCategory::kParameters) == 0);
  }
  CHECK(memory->stats().allocated == 0);
  // Outside any scope tensors come from the plain heap, uncounted.
  Tensor plain = Tensor::zeros({8});
  CHECK(plain.memory() == nullptr);
}

TEST_CASE("freed blocks are reused for requests of their size class", "[runtime][memory]") {
  auto memory = std::make_shared<DeviceMemory>(0, 0);
  MemoryScope scope(memory, MemoryCategory::kActivations);
  const float* first = nullptr;
  {
    Tensor a = Tensor::uninitialized(meshflow::ir::DType::F32, {10000});
    first = std::as_const(a).f32().data();
  }
  CHECK(memory->stats().cached >= 40000);
  memory->resetPeak();
  Tensor b = Tensor::uninitialized(meshflow::ir::DType::F32, {9900});  // same class, 25% steps
  CHECK(std::as_const(b).f32().data() == first);
  CHECK(memory->stats().reused == 1);
  CHECK(memory->stats().allocated == 39600);  // what the tensor holds, not the block
  memory->emptyCache();
  CHECK(memory->stats().cached == 0);
}

TEST_CASE("an allocation past the device's limit names the device, the bytes and what it holds",
          "[runtime][memory]") {
  auto memory = std::make_shared<DeviceMemory>(2, 4096);
  MemoryScope scope(memory, MemoryCategory::kParameters);
  Tensor w = Tensor::zeros({768});  // 3 KiB
  MemoryScope activations(MemoryCategory::kActivations);
  CHECK_THROWS_AS(Tensor::zeros({512}), DeviceMemoryError);
  CHECK_THROWS_WITH(Tensor::zeros({512}),
                    "out of memory on device 2: 2 KiB more for activations would hold 5 KiB of its "
                    "4 KiB (holding parameters 3 KiB)");
  CHECK(memory->stats().allocated == 3072);  // nothing was charged by the failures
  Tensor fits = Tensor::zeros({256});
  CHECK(memory->stats().allocated == 4096);
}

TEST_CASE(
    "a received tensor moves to the receiver's memory, copied when the sender still shares it",
    "[runtime][memory]") {
  auto sender = std::make_shared<DeviceMemory>(0, 0);
  auto receiver = std::make_shared<DeviceMemory>(1, 0);
  Tensor moved, shared, keep;
  {
    MemoryScope scope(sender, MemoryCategory::kActivations);
    moved = Tensor::full({100}, 1.5f);
    shared = Tensor::full({50}, 2.5f);
    keep = shared;  // the sender keeps a copy (its stash)
  }
  CHECK(sender->stats().allocated == 600);
  moved.moveInto(receiver, MemoryCategory::kActivations);
  shared.moveInto(receiver, MemoryCategory::kCommunication);
  CHECK(moved.memory() == receiver.get());
  CHECK(shared.memory() == receiver.get());
  CHECK_FALSE(shared.sharesStorage());
  CHECK(shared.f32()[49] == 2.5f);
  CHECK(sender->stats().allocated == 200);  // keep's elements
  CHECK(receiver->stats().allocated == 600);
  moved = Tensor();
  CHECK(receiver->stats().allocated == 200);
  CHECK(receiver->stats().cached >= 400);  // the sender's block now serves the receiver
}

TEST_CASE(
    "a tensor may outlive every other owner of its memory, and threads free each other's blocks",
    "[runtime][memory]") {
  Tensor survivor;
  std::weak_ptr<DeviceMemory> watch;
  {
    auto memory = std::make_shared<DeviceMemory>(0, 0);
    watch = memory;
    MemoryScope scope(memory, MemoryCategory::kActivations);
    survivor = Tensor::full({4}, 7);
  }
  CHECK_FALSE(watch.expired());
  CHECK(survivor.f32()[3] == 7);
  std::thread([t = std::move(survivor)]() mutable { t = Tensor(); }).join();
  CHECK(watch.expired());
}

namespace {

// A fake device memory of `capacity` bytes, as the cuda backend's CudaBlocks
// is one over cudaMalloc: the accounting above it is DeviceMemory's own.
class FakeBlocks final : public BlockSource {
 public:
  FakeBlocks(std::size_t capacity, int* live) : capacity_(capacity), live_(live) {}
  void* allocate(std::size_t bytes) override {
    if (bytes == 3008) throw std::runtime_error("the device fell off the bus");
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    ++*live_;
    return ::operator new(bytes);
  }
  void free(void* data, std::size_t bytes) override {
    used_ -= bytes;
    --*live_;
    ::operator delete(data);
  }
  std::string name() const override { return "fake GPU"; }

 private:
  std::size_t capacity_, used_ = 0;
  int* live_;
};

}  // namespace

TEST_CASE("a block source's memory is counted, cached and given back like the host's", "[runtime][memory]") {
  int live = 0;
  {
    DeviceMemory memory(1, 0, std::make_unique<FakeBlocks>(1 << 20, &live));
    auto a = memory.allocate(1000, MemoryCategory::kActivations);
    CHECK(live == 1);
    CHECK(memory.stats().allocated == 1000);
    memory.release(a, 1000, MemoryCategory::kActivations);
    auto b = memory.allocate(1000, MemoryCategory::kGradients);  // from the cache
    CHECK(b.data == a.data);
    CHECK(live == 1);
    CHECK(memory.stats().reused == 1);
    memory.release(b, 1000, MemoryCategory::kGradients);
  }
  CHECK(live == 0);  // the cache went back to the source
}

TEST_CASE("a source out of memory gets the cache back first, then the error names it", "[runtime][memory]") {
  int live = 0;
  DeviceMemory memory(2, 0, std::make_unique<FakeBlocks>(96 * 1024, &live));
  auto a = memory.allocate(64 * 1024, MemoryCategory::kActivations);
  memory.release(a, 64 * 1024, MemoryCategory::kActivations);
  // 48 KiB fits only once the cached 64 KiB block is freed.
  auto b = memory.allocate(48 * 1024, MemoryCategory::kParameters);
  CHECK(live == 1);
  CHECK(memory.stats().cached == 0);
  try {
    memory.allocate(64 * 1024, MemoryCategory::kActivations);
    FAIL("no error");
  } catch (const DeviceMemoryError& e) {
    CHECK(std::string(e.what()) == "out of fake GPU memory on device 2: 64 KiB for activations");
  }
  CHECK(memory.stats().allocated == 48 * 1024);  // the failed request is not charged
  memory.release(b, 48 * 1024, MemoryCategory::kParameters);
}

TEST_CASE("a source that throws leaves the accounting as it was", "[runtime][memory]") {
  int live = 0;
  DeviceMemory memory(0, 0, std::make_unique<FakeBlocks>(1 << 20, &live));
  CHECK_THROWS_WITH(memory.allocate(3000, MemoryCategory::kActivations), "the device fell off the bus");
  CHECK(memory.stats().allocated == 0);
  CHECK(live == 0);
}
