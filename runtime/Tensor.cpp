#include "runtime/Tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numbers>
#include <random>
#include <stdexcept>

namespace meshflow::runtime {
namespace {

void requireHostDType(ir::DType dtype) {
  if (dtype == ir::DType::I64)
    throw std::invalid_argument(
        fmt::format("host tensors hold f32, f16, bf16 or i32, not {}", ir::dtypeName(dtype)));
}

bool isFloat(ir::DType dtype) {
  return dtype == ir::DType::F32 || dtype == ir::DType::F16 || dtype == ir::DType::BF16;
}

// A double in [0, 1) from the top 53 bits of one mt19937_64 draw.
double unitDouble(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

std::int64_t shapeElements(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

std::string shapeText(const Shape& shape) {
  std::string dims;
  for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  return "[" + dims + "]";
}

std::vector<std::int64_t> rowMajorStrides(const Shape& shape) {
  std::vector<std::int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

Shape boundShape(const ir::TensorType& type, std::int64_t batchSize) {
  Shape shape;
  for (const auto& d : type.shape) shape.push_back(d.resolve(batchSize));
  return shape;
}

constexpr std::align_val_t kHeapAlignment{64};

// Which copy of a device-only block's elements is current: the block, the
// host's, or both (neither written since they last agreed).
struct Tensor::Storage::Mirror {
  enum class Current : std::uint8_t { kBlock, kHost, kBoth };
  std::mutex mutex;
  void* host = nullptr;  // allocated on the first host access
  Current current = Current::kBlock;
  ~Mirror() {
    if (host) ::operator delete(host, kHeapAlignment);
  }
};

namespace {
thread_local bool tDeviceViews = false;
}  // namespace

Tensor::DeviceViewScope::DeviceViewScope() : previous_(tDeviceViews) { tDeviceViews = true; }
Tensor::DeviceViewScope::~DeviceViewScope() { tDeviceViews = previous_; }

Tensor::Storage::Storage(std::size_t n)
    : bytes(n), memory(MemoryScope::current()), category(MemoryScope::currentCategory()) {
  if (bytes == 0) return;
  if (memory) {
    DeviceMemory::Block block = memory->allocate(bytes, category);
    data = block.data;
    capacity = block.capacity;
    if (!memory->hostVisible()) mirror = std::make_unique<Mirror>();
  } else {
    data = ::operator new(bytes, kHeapAlignment);
    capacity = bytes;
  }
}

void* Tensor::Storage::deviceData(bool write) const {
  if (!mirror) return data;
  std::lock_guard<std::mutex> lock(mirror->mutex);
  if (mirror->current == Mirror::Current::kHost) {
    memory->blocks().copyFromHost(data, mirror->host, bytes);
    mirror->current = Mirror::Current::kBoth;
  }
  if (write) {
    mirror->current = Mirror::Current::kBlock;
    if (mirror->host && memory->blocks().poisonsStaleCopies()) std::memset(mirror->host, 0xFF, bytes);
  }
  return data;
}

void* Tensor::Storage::hostData(bool write) const {
  if (!mirror || tDeviceViews) return deviceData(write);
  std::lock_guard<std::mutex> lock(mirror->mutex);
  if (!mirror->host) mirror->host = ::operator new(bytes, kHeapAlignment);
  if (mirror->current == Mirror::Current::kBlock) {
    memory->blocks().copyToHost(mirror->host, data, bytes);
    mirror->current = Mirror::Current::kBoth;
  }
  if (write) {
    mirror->current = Mirror::Current::kHost;
    if (memory->blocks().poisonsStaleCopies()) std::memset(data, 0xFF, bytes);
  }
  return mirror->host;
}

std::shared_ptr<Tensor::Storage> Tensor::Storage::copy() const {
  auto own = std::make_shared<Storage>(bytes);
  if (!bytes) return own;
  if (!mirror && !own->mirror) {
    std::memcpy(own->data, data, bytes);
    return own;
  }
  // Block to block when both are device blocks and the block is current.
  bool blockCurrent = false;
  if (mirror && own->mirror) {
    std::lock_guard<std::mutex> lock(mirror->mutex);
    blockCurrent = mirror->current != Mirror::Current::kHost;
  }
  if (blockCurrent) own->memory->blocks().copyBlocks(own->deviceData(true), data, bytes);
  else std::memcpy(own->hostData(true), hostData(false), bytes);
  return own;
}

Tensor::Storage::~Storage() {
  if (!data) return;
  if (memory) memory->release({data, capacity}, bytes, category);
  else ::operator delete(data, kHeapAlignment);
}

Tensor::Tensor(ir::DType dtype, Shape shape, Uninitialized) : dtype_(dtype), shape_(std::move(shape)), allocated_(true) {
  requireHostDType(dtype);
  for (auto d : shape_)
    if (d < 0)
      throw std::invalid_argument("negative dimension in tensor shape " + shapeText(shape_));
  storage_ = std::make_shared<Storage>(static_cast<std::size_t>(elements()) * ir::dtypeBytes(dtype));
}

Tensor::Tensor(ir::DType dtype, Shape shape) : Tensor(dtype, std::move(shape), Uninitialized{}) {
  if (storage_->bytes) std::memset(storage_->hostData(true), 0, storage_->bytes);
}

Tensor Tensor::uninitialized(ir::DType dtype, Shape shape) {
  return Tensor(dtype, std::move(shape), Uninitialized{});
}

Tensor Tensor::placeholder(ir::DType dtype, Shape shape) {
  requireHostDType(dtype);
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.placeholder_ = true;
  return t;
}

Tensor Tensor::full(Shape shape, float value) {
  Tensor t(ir::DType::F32, std::move(shape), Uninitialized{});
  auto values = t.f32();
  std::fill(values.begin(), values.end(), value);
  return t;
}

Tensor Tensor::fromF32(Shape shape, std::vector<float> values) {
  Tensor t(ir::DType::F32, std::move(shape), Uninitialized{});
  if (values.size() != t.count())
    throw std::invalid_argument(
        fmt::format("{} values for a tensor of shape {}", values.size(), shapeText(t.shape_)));
  std::copy(values.begin(), values.end(), t.f32().begin());
  return t;
}

Tensor Tensor::fromI32(Shape shape, std::vector<std::int32_t> values) {
  Tensor t(ir::DType::I32, std::move(shape), Uninitialized{});
  if (values.size() != t.count())
    throw std::invalid_argument(
        fmt::format("{} values for a tensor of shape {}", values.size(), shapeText(t.shape_)));
  std::copy(values.begin(), values.end(), t.i32().begin());
  return t;
}

std::int64_t Tensor::dim(std::int64_t axis) const {
  auto r = static_cast<std::int64_t>(rank());
  if (axis < -r || axis >= r)
    throw std::out_of_range(fmt::format("axis {} of a rank-{} tensor", axis, r));
  return shape_[static_cast<std::size_t>(axis < 0 ? axis + r : axis)];
}

Tensor Tensor::reshaped(Shape shape) const {
  if (!allocated_) throw std::logic_error("reshaping an unallocated tensor");
  if (shapeElements(shape) != elements())
    throw std::invalid_argument(fmt::format("cannot reshape {} to {}", typeText(), shapeText(shape)));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

void Tensor::requireView(ir::DType dtype) const {
  if (!allocated_ || dtype_ != dtype)
    throw std::logic_error(std::string(ir::dtypeName(dtype)) + " view of a " + typeText() + " tensor");
}

// A writer needs elements of its own. use_count() == 1 means no other tensor
// can reach them; the acquire fence orders this thread's writes after every
// read another thread made before it let go of its share (shared_ptr releases
// its count with release semantics).
void Tensor::unshare() {
  if (!storage_) return;
  if (storage_.use_count() == 1) {
    std::atomic_thread_fence(std::memory_order_acquire);
    return;
  }
  // The writer's copy is the writer's: it comes from this thread's memory,
  // and holds what the shared elements held (a parameter stays a parameter).
  MemoryScope scope(MemoryScope::current(), storage_->category);
  storage_ = storage_->copy();
}

Tensor Tensor::clone() const {
  Tensor t = *this;
  if (storage_) t.storage_ = storage_->copy();
  return t;
}

void Tensor::chargeTo(MemoryCategory category) {
  if (!storage_ || !storage_->memory || storage_->category == category) return;
  storage_->memory->recharge(storage_->bytes, storage_->category, category);
  storage_->category = category;
}

void Tensor::moveInto(const std::shared_ptr<DeviceMemory>& memory, MemoryCategory category) {
  if (!storage_ || !memory) return;
  if (storage_->memory == memory) return chargeTo(category);
  // Shared elements stay where they are for the other holders; a heap block
  // was not sized for a device's cache; a block of another place (another
  // GPU's device memory) is not the receiver's to hand out. All are copied.
  if (storage_.use_count() > 1 || !storage_->memory || !storage_->memory->canHandBlocksTo(*memory)) {
    MemoryScope scope(memory, category);
    storage_ = storage_->copy();
    return;
  }
  memory->adopt(storage_->bytes, category);
  storage_->memory->disown(storage_->bytes, storage_->category);
  storage_->memory = memory;
  storage_->category = category;
}

template <class T>
std::span<T> Tensor::view(ir::DType dtype) {
  requireView(dtype);
  unshare();
  if (!storage_) return {};
  return {static_cast<T*>(storage_->hostData(true)), count()};
}

template <class T>
std::span<const T> Tensor::view(ir::DType dtype) const {
  requireView(dtype);
  if (!storage_) return {};
  return {static_cast<const T*>(storage_->hostData(false)), count()};
}

std::span<float> Tensor::f32() { return view<float>(ir::DType::F32); }
std::span<const float> Tensor::f32() const { return view<float>(ir::DType::F32); }
std::span<std::int32_t> Tensor::i32() { return view<std::int32_t>(ir::DType::I32); }
std::span<const std::int32_t> Tensor::i32() const { return view<std::int32_t>(ir::DType::I32); }
std::span<Half> Tensor::f16() { return view<Half>(ir::DType::F16); }
std::span<const Half> Tensor::f16() const { return view<Half>(ir::DType::F16); }
std::span<BFloat16> Tensor::bf16() { return view<BFloat16>(ir::DType::BF16); }
std::span<const BFloat16> Tensor::bf16() const { return view<BFloat16>(ir::DType::BF16); }

std::span<std::byte> Tensor::raw() {
  if (!allocated_) throw std::logic_error("raw bytes of an unallocated tensor");
  unshare();
  if (!storage_) return {};
  return {static_cast<std::byte*>(storage_->hostData(true)), storage_->bytes};
}

std::span<const std::byte> Tensor::raw() const {
  if (!allocated_) throw std::logic_error("raw bytes of an unallocated tensor");
  if (!storage_) return {};
  return {static_cast<const std::byte*>(storage_->hostData(false)), storage_->bytes};
}

const void* Tensor::deviceData() const {
  if (!allocated_) throw std::logic_error("device data of an unallocated tensor");
  return storage_ ? storage_->deviceData(false) : nullptr;
}

void* Tensor::deviceData() {
  if (!allocated_) throw std::logic_error("device data of an unallocated tensor");
  unshare();
  return storage_ ? storage_->deviceData(true) : nullptr;
}

Tensor Tensor::castTo(ir::DType dtype) const {
  if (!allocated_ || !isFloat(dtype_) || !isFloat(dtype))
    throw std::logic_error(fmt::format("cannot convert a {} tensor to {}", typeText(), ir::dtypeName(dtype)));
  if (dtype == dtype_) return *this;
  Tensor result(dtype, shape_, Uninitialized{});
  if (dtype_ == ir::DType::F32) {
    if (dtype == ir::DType::F16) narrow(f32(), result.f16());
    else narrow(f32(), result.bf16());
    return result;
  }
  // Half to half goes through f32, which holds every value of both exactly.
  if (dtype != ir::DType::F32) return toF32().castTo(dtype);
  if (dtype_ == ir::DType::F16) widen(f16(), result.f32());
  else widen(bf16(), result.f32());
  return result;
}

float Tensor::item() const {
  auto values = f32();
  if (values.size() != 1) throw std::logic_error("item() of a " + typeText() + " tensor");
  return values[0];
}

std::string Tensor::typeText() const {
  if (!allocated_) return "unallocated";
  return ir::dtypeName(dtype_) + shapeText(shape_);
}

bool Tensor::bitEqual(const Tensor& other) const {
  if (allocated_ != other.allocated_ || dtype_ != other.dtype_ || shape_ != other.shape_)
    return false;
  if (!allocated_) return true;
  // Compare bits, not values: NaN == NaN here, and -0 differs from +0.
  if (bytes() == 0) return true;
  return std::memcmp(storage_->hostData(false), other.storage_->hostData(false), bytes()) == 0;
}

Tensor randomNormal(Shape shape, std::uint64_t seed, float stddev) {
  Tensor t = Tensor::zeros(std::move(shape));
  std::mt19937_64 rng(seed);
  auto values = t.f32();
  for (std::size_t i = 0; i < values.size(); i += 2) {
    // Box–Muller: two normals from two uniforms; 1 - u keeps the log finite.
    double u1 = 1.0 - unitDouble(rng);
    double u2 = unitDouble(rng);
    double r = std::sqrt(-2.0 * std::log(u1));
    values[i] = static_cast<float>(stddev * r * std::cos(2.0 * std::numbers::pi * u2));
    if (i + 1 < values.size())
      values[i + 1] = static_cast<float>(stddev * r * std::sin(2.0 * std::numbers::pi * u2));
  }
  return t;
}

Tensor randomInts(Shape shape, std::int32_t lo, std::int32_t hi, std::uint64_t seed) {
  if (hi <= lo) throw std::invalid_argument("randomInts needs lo < hi");
  Tensor t(ir::DType::I32, std::move(shape));
  std::mt19937_64 rng(seed);
  // In 64 bits: hi - lo may pass 2^31 (lo = -2e9, hi = 2e9).
  const auto range = static_cast<std::uint64_t>(std::int64_t{hi} - lo);
  for (auto& v : t.i32()) v = static_cast<std::int32_t>(std::int64_t{lo} + static_cast<std::int64_t>(rng() % range));
  return t;
}

double maxAbsDiff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw std::invalid_argument("maxAbsDiff of " + a.typeText() + " and " + b.typeText());
  Tensor wideA = a.toF32(), wideB = b.toF32();
  auto x = wideA.f32();
  auto y = wideB.f32();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(x[i]) - y[i]));
  return worst;
}

bool allClose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  Tensor wideA = a.toF32(), wideB = b.toF32();
  auto x = wideA.f32();
  auto y = wideB.f32();
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(static_cast<double>(x[i]) - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  return true;
}

}  // namespace meshflow::runtime
