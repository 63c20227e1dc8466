// runtime::Tensor — a host tensor: f32, f16, bf16 or i32, a concrete row-major
// shape and contiguous storage (2 bytes an element for the half types). It is
// what every CPU kernel reads and writes and what the serial executor hands
// back to its caller.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ir/Graph.h"
#include "runtime/HalfFloat.h"
#include "runtime/memory/DeviceMemory.h"

namespace meshflow::runtime {

using Shape = std::vector<std::int64_t>;

/// Elements of a shape (1 for a scalar, the empty shape).
std::int64_t shapeElements(const Shape& shape);
/// "[2, 3]", "[]" for a scalar.
std::string shapeText(const Shape& shape);
/// Row-major strides in elements: the last dimension has stride 1.
std::vector<std::int64_t> rowMajorStrides(const Shape& shape);
/// The concrete shape of `type` once the symbolic batch is `batchSize`.
Shape boundShape(const ir::TensorType& type, std::int64_t batchSize);

/// A tensor's elements are shared between copies until one of them is written
/// (copy on write): copying a tensor, or reshaping it, copies no elements.
/// Every write goes through the non-const f32() / i32(), which give the tensor
/// storage of its own first. Keep no mutable span across a copy of its tensor.
///
/// Storage comes from the DeviceMemory of the allocating thread's MemoryScope
/// (counted under its category, cached when freed), else from the plain heap.
/// In a memory the host cannot address (DeviceMemory::hostVisible() false:
/// the cuda backend's cudaMalloc blocks) the typed views and raw() read and
/// write a host copy, and deviceData() the block: each is brought up to date
/// from the other when it is asked for after the other was written (whole
/// tensors; the device's queued work is waited for). Keep no view across an
/// access from the other side.
/// Elements are never zeroed unless asked (Tensor(dtype, shape)): kernels
/// write every element of their outputs, and zeroing first was 5–6% of a GPT
/// step.
class Tensor {
 public:
  /// An unallocated tensor: no dtype or shape yet. A kernel given one as an
  /// output allocates it with the shape it computes.
  Tensor() = default;
  /// A zero-filled tensor. The host holds f32, f16, bf16 and i32.
  Tensor(ir::DType dtype, Shape shape);

  static Tensor zeros(Shape shape) { return Tensor(ir::DType::F32, std::move(shape)); }
  /// A tensor whose elements are not initialised: for outputs that a kernel
  /// overwrites entirely (every kernel does, docs/runtime.md).
  static Tensor uninitialized(ir::DType dtype, Shape shape);
  /// An unallocated tensor that already knows its dtype and shape: an output
  /// for a kernel to allocate (or to alias, as Reshape does), checked against
  /// what the kernel computes.
  static Tensor placeholder(ir::DType dtype, Shape shape);
  static Tensor full(Shape shape, float value);
  static Tensor scalar(float value) { return full({}, value); }
  static Tensor fromF32(Shape shape, std::vector<float> values);
  static Tensor fromI32(Shape shape, std::vector<std::int32_t> values);

  bool allocated() const { return allocated_; }
  bool isPlaceholder() const { return placeholder_; }
  ir::DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::size_t rank() const { return shape_.size(); }
  /// Dimension `axis`; negative counts from the end.
  std::int64_t dim(std::int64_t axis) const;
  std::int64_t elements() const { return shapeElements(shape_); }
  std::size_t bytes() const { return static_cast<std::size_t>(elements()) * ir::dtypeBytes(dtype_); }

  /// The same elements under another shape of as many elements (shared until
  /// either is written). Throws std::invalid_argument for another count.
  Tensor reshaped(Shape shape) const;
  /// Whether this tensor shares its elements with another tensor.
  bool sharesStorage() const { return storage_ && storage_.use_count() > 1; }

  /// A copy with elements of its own, from the current MemoryScope.
  Tensor clone() const;

  /// The DeviceMemory its elements are counted in (null: the plain heap).
  const DeviceMemory* memory() const { return storage_ ? storage_->memory.get() : nullptr; }
  /// Counts its elements under `category` of their memory from now on.
  void chargeTo(MemoryCategory category);
  /// Makes `memory` hold its elements under `category`, as a device that
  /// receives them does: moves the charge, or copies the elements when another
  /// tensor shares them (both devices then hold them). Throws
  /// DeviceMemoryError past the limit.
  void moveInto(const std::shared_ptr<DeviceMemory>& memory, MemoryCategory category);

  /// Typed views; asking for the wrong dtype is a broken invariant (throws
  /// logic_error). The mutable ones unshare the elements first.
  std::span<float> f32();
  std::span<const float> f32() const;
  std::span<std::int32_t> i32();
  std::span<const std::int32_t> i32() const;
  std::span<Half> f16();
  std::span<const Half> f16() const;
  std::span<BFloat16> bf16();
  std::span<const BFloat16> bf16() const;

  /// The elements as bytes, whatever the dtype: for code that moves elements
  /// without reading them (tiles, messages, batch slices). The mutable one
  /// unshares first.
  std::span<std::byte> raw();
  std::span<const std::byte> raw() const;

  /// The elements where the device's kernels read and write them: the block
  /// of a memory the host cannot address (brought up to date from the host's
  /// copy if the host wrote last), else what raw() gives. The mutable one
  /// unshares first and makes the block the current copy (a kernel writes it).
  const void* deviceData() const;
  void* deviceData();

  /// While alive, this thread's views of tensors in memory the host cannot
  /// address are the blocks themselves (as deviceData()): for a backend whose
  /// "device" kernels are the cpu kernels on host-addressable blocks (tests).
  class DeviceViewScope {
   public:
    DeviceViewScope();
    ~DeviceViewScope();
    DeviceViewScope(const DeviceViewScope&) = delete;
    DeviceViewScope& operator=(const DeviceViewScope&) = delete;

   private:
    bool previous_;
  };

  /// The elements converted to `dtype`, a float type: widening is exact,
  /// narrowing rounds to nearest even (f16 overflows to infinity). The same
  /// dtype gives this tensor (sharing its elements). An i32 tensor or target
  /// is a broken invariant (throws logic_error).
  Tensor castTo(ir::DType dtype) const;
  /// castTo(f32): what kernels compute on.
  Tensor toF32() const { return castTo(ir::DType::F32); }

  /// The value of a one-element f32 tensor.
  float item() const;
  /// "f32[2, 3]".
  std::string typeText() const;
  /// Same dtype, shape and bit-identical contents.
  bool bitEqual(const Tensor& other) const;

 private:
  ir::DType dtype_ = ir::DType::F32;
  Shape shape_;
  bool allocated_ = false;
  bool placeholder_ = false;
  // Elements of one dtype (ir::dtypeBytes each), from a DeviceMemory or the heap.
  struct Storage {
    void* data = nullptr;
    std::size_t bytes = 0;
    std::size_t capacity = 0;
    std::shared_ptr<DeviceMemory> memory;  // null: the plain heap
    MemoryCategory category = MemoryCategory::kActivations;

    /// `bytes` from the current MemoryScope's memory, else the heap.
    explicit Storage(std::size_t bytes);
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    /// Another block with these bytes, from the current MemoryScope's memory.
    std::shared_ptr<Storage> copy() const;

    // In a memory the host cannot address: the host's copy and which copy is
    // current (null otherwise: the host uses `data`).
    struct Mirror;
    std::unique_ptr<Mirror> mirror;
    /// The elements for the host / for the device, the other copy brought up
    /// to date first; `write` makes this one the only current copy.
    void* hostData(bool write) const;
    void* deviceData(bool write) const;
  };
  std::shared_ptr<Storage> storage_;
  std::size_t count() const { return storage_ ? storage_->bytes / ir::dtypeBytes(dtype_) : 0; }
  template <class T>
  std::span<T> view(ir::DType dtype);
  template <class T>
  std::span<const T> view(ir::DType dtype) const;

  struct Uninitialized {};
  Tensor(ir::DType dtype, Shape shape, Uninitialized);
  void requireView(ir::DType dtype) const;
  void unshare();
};

// ---- helpers for tests and tools ----

/// Normal(0, stddev) values from a seeded std::mt19937_64 (Box–Muller, so the
/// values are the same with every standard library).
Tensor randomNormal(Shape shape, std::uint64_t seed, float stddev = 1.0f);
/// Uniform integers in [lo, hi) as i32.
Tensor randomInts(Shape shape, std::int32_t lo, std::int32_t hi, std::uint64_t seed);
/// Largest |a - b| over two float tensors of one shape (half ones widened).
double maxAbsDiff(const Tensor& a, const Tensor& b);
/// |a - b| <= atol + rtol * |b| element-wise (same shape required; half
/// tensors are widened to f32 first).
bool allClose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-6);

}  // namespace meshflow::runtime
