#include "runtime/Tensor.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <random>
#include <stdexcept>

namespace meshflow::runtime {
namespace {

void requireHostDType(ir::DType dtype) {
  if (dtype != ir::DType::F32 && dtype != ir::DType::I32)
    throw std::invalid_argument(
        fmt::format("host tensors hold f32 or i32, not {}", ir::dtypeName(dtype)));
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

Tensor::Tensor(ir::DType dtype, Shape shape, Uninitialized)
    : dtype_(dtype), shape_(std::move(shape)), allocated_(true) {
  requireHostDType(dtype);
  for (auto d : shape_)
    if (d < 0)
      throw std::invalid_argument("negative dimension in tensor shape " + shapeText(shape_));
  auto n = static_cast<std::size_t>(elements());
  if (dtype == ir::DType::F32)
    f32_.resize(n);
  else
    i32_.resize(n);
}

Tensor::Tensor(ir::DType dtype, Shape shape) : Tensor(dtype, std::move(shape), Uninitialized{}) {
  std::fill(f32_.begin(), f32_.end(), 0.0f);
  std::fill(i32_.begin(), i32_.end(), 0);
}

Tensor Tensor::uninitialized(ir::DType dtype, Shape shape) {
  return Tensor(dtype, std::move(shape), Uninitialized{});
}

Tensor Tensor::full(Shape shape, float value) {
  Tensor t(ir::DType::F32, std::move(shape), Uninitialized{});
  std::fill(t.f32_.begin(), t.f32_.end(), value);
  return t;
}

Tensor Tensor::fromF32(Shape shape, std::vector<float> values) {
  Tensor t(ir::DType::F32, std::move(shape), Uninitialized{});
  if (values.size() != t.f32_.size())
    throw std::invalid_argument(
        fmt::format("{} values for a tensor of shape {}", values.size(), shapeText(t.shape_)));
  std::copy(values.begin(), values.end(), t.f32_.begin());
  return t;
}

Tensor Tensor::fromI32(Shape shape, std::vector<std::int32_t> values) {
  Tensor t(ir::DType::I32, std::move(shape), Uninitialized{});
  if (values.size() != t.i32_.size())
    throw std::invalid_argument(
        fmt::format("{} values for a tensor of shape {}", values.size(), shapeText(t.shape_)));
  std::copy(values.begin(), values.end(), t.i32_.begin());
  return t;
}

std::int64_t Tensor::dim(std::int64_t axis) const {
  auto r = static_cast<std::int64_t>(rank());
  if (axis < -r || axis >= r)
    throw std::out_of_range(fmt::format("axis {} of a rank-{} tensor", axis, r));
  return shape_[static_cast<std::size_t>(axis < 0 ? axis + r : axis)];
}

std::span<float> Tensor::f32() {
  if (!allocated_ || dtype_ != ir::DType::F32)
    throw std::logic_error("f32 view of a " + typeText() + " tensor");
  return f32_;
}

std::span<const float> Tensor::f32() const {
  if (!allocated_ || dtype_ != ir::DType::F32)
    throw std::logic_error("f32 view of a " + typeText() + " tensor");
  return f32_;
}

std::span<std::int32_t> Tensor::i32() {
  if (!allocated_ || dtype_ != ir::DType::I32)
    throw std::logic_error("i32 view of a " + typeText() + " tensor");
  return i32_;
}

std::span<const std::int32_t> Tensor::i32() const {
  if (!allocated_ || dtype_ != ir::DType::I32)
    throw std::logic_error("i32 view of a " + typeText() + " tensor");
  return i32_;
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
  if (dtype_ == ir::DType::I32) return i32_ == other.i32_;
  // Compare bits, not values: NaN == NaN here, and -0 differs from +0.
  return f32_.empty() || std::memcmp(f32_.data(), other.f32_.data(), f32_.size() * 4) == 0;
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
  auto range = static_cast<std::uint64_t>(hi - lo);
  for (auto& v : t.i32()) v = lo + static_cast<std::int32_t>(rng() % range);
  return t;
}

double maxAbsDiff(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw std::invalid_argument("maxAbsDiff of " + a.typeText() + " and " + b.typeText());
  auto x = a.f32();
  auto y = b.f32();
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(x[i]) - y[i]));
  return worst;
}

bool allClose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  auto x = a.f32();
  auto y = b.f32();
  for (std::size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(static_cast<double>(x[i]) - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  return true;
}

}  // namespace meshflow::runtime
