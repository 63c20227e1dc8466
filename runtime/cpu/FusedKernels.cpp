// The fused groups' reference computation (FusedKernels.h). Every step is the
// unfused chain's, element by element: Scale's product in f32, the causal
// mask's −1e9 entries weighing exactly 0 after expNonPositive, softmax's row
// sum in double in element order, each op's result rounded to the operands'
// type where that op would store it.
#include "runtime/cpu/FusedKernels.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "runtime/HalfFloat.h"
#include "runtime/cpu/FastMath.h"
#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

bool isFloat(ir::DType d) {
  return d == ir::DType::F32 || d == ir::DType::F16 || d == ir::DType::BF16;
}

// v as stored in `dtype` and read back (the rounding of an op's result).
std::function<float(float)> rounding(ir::DType dtype) {
  if (dtype == ir::DType::F16) return [](float v) { return fromHalf(toHalf(v)); };
  if (dtype == ir::DType::BF16) return [](float v) { return fromBFloat16(toBFloat16(v)); };
  return [](float v) { return v; };
}

bool causalShape(const Tensor& x) { return x.rank() >= 2 && x.dim(-1) == x.dim(-2); }

// Row r of rows of width s: how many leading entries the causal mask keeps.
std::int64_t keptOf(const FusedGroup& g, std::int64_t r, std::int64_t width) {
  return g.causal ? r % width + 1 : width;
}

std::vector<float> softmaxRows(const FusedGroup& g, const Tensor& x,
                               const std::function<float(float)>& round) {
  const Tensor wide = x.toF32();
  const std::span<const float> in = wide.f32();
  const std::int64_t width = x.rank() == 0 ? 1 : x.dim(-1);
  const std::int64_t rows = width == 0 ? 0 : x.elements() / width;
  const auto factor = static_cast<float>(g.scale);
  std::vector<float> y(in.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t base = r * width, kept = keptOf(g, r, width);
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < kept; ++j) max = std::max(max, round(in[base + j] * factor));
    double sum = 0;
    for (std::int64_t j = 0; j < width; ++j) {
      y[base + j] = j < kept ? expNonPositive(round(in[base + j] * factor) - max) : 0.0f;
      sum += y[base + j];
    }
    const auto inverse = static_cast<float>(1.0 / sum);
    for (std::int64_t j = 0; j < width; ++j) y[base + j] = round(y[base + j] * inverse);
  }
  return y;
}

std::vector<float> softmaxGradRows(const FusedGroup& g, const Tensor& y, const Tensor& dy,
                                   const std::function<float(float)>& round) {
  const Tensor wy = y.toF32(), wdy = dy.toF32();
  const std::span<const float> ys = wy.f32(), ds = wdy.f32();
  const std::int64_t width = y.dim(-1);
  const std::int64_t rows = width == 0 ? 0 : y.elements() / width;
  const auto factor = static_cast<float>(g.scale);
  std::vector<float> dx(ys.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t base = r * width, kept = keptOf(g, r, width);
    double dot = 0;  // the whole row, as SoftmaxGrad sums it
    for (std::int64_t j = 0; j < width; ++j)
      dot += static_cast<double>(ys[base + j]) * ds[base + j];
    for (std::int64_t j = 0; j < width; ++j) {
      const float v =
          j < kept ? round(static_cast<float>(ys[base + j] * (ds[base + j] - dot))) : 0.0f;
      dx[base + j] = round(v * factor);
    }
  }
  return dx;
}

// One op of a chain on f32 values, as ElementwiseKernels.cpp's binary() and unary() compute it.
float stepOf(const ChainStep& step, float chain, float other) {
  using K = ir::OpKind;
  const float a = step.chainOnRight ? other : chain, b = step.chainOnRight ? chain : other;
  switch (step.kind) {
    case K::Add:
      return a + b;
    case K::Sub:
      return a - b;
    case K::Mul:
      return a * b;
    case K::Div:
      return a / b;
    case K::Neg:
      return -chain;
    case K::Relu:
      return chain > 0 ? chain : 0.0f;
    case K::Gelu:
      return geluOf(chain);
    case K::Tanh:
      return fastTanh(chain);
    case K::Sigmoid:
      return sigmoidOf(chain);
    case K::Exp:
      return std::exp(chain);
    default:
      return chain * static_cast<float>(step.factor);  // Scale
  }
}

std::vector<float> chainValues(const FusedGroup& g, const std::vector<const Tensor*>& inputs,
                               const Shape& shape, const std::function<float(float)>& round) {
  std::vector<Tensor> wide;
  std::vector<std::vector<std::int64_t>> strides;
  for (const Tensor* t : inputs) {
    wide.push_back(t->toF32());
    strides.push_back(broadcastStrides(t->shape(), shape));
  }
  const auto n = static_cast<std::size_t>(shapeElements(shape));
  std::vector<float> y(n);
  std::vector<std::int64_t> offsets(inputs.size());
  for (std::size_t i = 0; i < n; ++i) {
    std::int64_t rest = static_cast<std::int64_t>(i);
    std::fill(offsets.begin(), offsets.end(), 0);
    for (std::size_t d = shape.size(); d-- > 0;) {
      const std::int64_t coordinate = rest % shape[d];
      rest /= shape[d];
      for (std::size_t k = 0; k < inputs.size(); ++k) offsets[k] += coordinate * strides[k][d];
    }
    const auto at = [&](std::size_t k) {
      return wide[k].f32()[static_cast<std::size_t>(offsets[k])];
    };
    float v = at(0);
    for (const ChainStep& step : g.steps)
      v = round(stepOf(step, v, step.other < 0 ? 0.0f : at(static_cast<std::size_t>(step.other))));
    y[i] = v;
  }
  return y;
}

void store(Tensor* out, const Shape& shape, ir::DType dtype, std::vector<float> values) {
  if (out) *out = Tensor::fromF32(shape, std::move(values)).castTo(dtype);
}

}  // namespace

std::optional<Shape> fusedChainShape(const FusedGroup& g,
                                     const std::vector<const Tensor*>& inputs) {
  if (g.steps.empty() || g.steps.size() > kMaxChainSteps || inputs.size() > kMaxChainInputs)
    return std::nullopt;
  const ChainStep& first = g.steps[0];
  if (first.other < 0) return inputs[0]->shape();
  return broadcastShapes(inputs[0]->shape(),
                         inputs.at(static_cast<std::size_t>(first.other))->shape());
}

bool fusable(const FusedGroup& group, const std::vector<const Tensor*>& inputs) {
  if (inputs.size() != group.inputs.size() || inputs.empty()) return false;
  for (const Tensor* t : inputs)
    if (!t || !t->allocated() || !isFloat(t->dtype()) || t->dtype() != inputs[0]->dtype())
      return false;
  const Tensor& x = *inputs[0];
  switch (group.pattern) {
    case FusedPattern::kSoftmax:
      return x.rank() >= 1 && (!group.causal || causalShape(x));
    case FusedPattern::kSoftmaxGrad:
      return x.rank() >= 1 && inputs[1]->shape() == x.shape() && (!group.causal || causalShape(x));
    case FusedPattern::kBiasGelu:
      return x.rank() >= 1 && inputs[1]->shape() == Shape{x.dim(-1)};
    case FusedPattern::kElementwise: {
      const std::optional<Shape> shape = fusedChainShape(group, inputs);
      if (!shape) return false;
      for (const Tensor* t : inputs)
        if (broadcastShapes(t->shape(), *shape) != shape)
          return false;  // each operand broadcasts into it
      return true;
    }
  }
  return false;
}

void runFused(const FusedGroup& group, const std::vector<const Tensor*>& inputs,
              std::vector<Tensor*>& outputs) {
  const Tensor& x = *inputs.at(0);
  const ir::DType dtype = x.dtype();
  const auto round = rounding(dtype);
  switch (group.pattern) {
    case FusedPattern::kSoftmax:
      return store(outputs.at(0), x.shape(), dtype, softmaxRows(group, x, round));
    case FusedPattern::kSoftmaxGrad:
      return store(outputs.at(0), x.shape(), dtype,
                   softmaxGradRows(group, x, *inputs.at(1), round));
    case FusedPattern::kBiasGelu: {
      const Tensor wx = x.toF32(), wb = inputs.at(1)->toF32();
      const std::span<const float> xs = wx.f32(), bs = wb.f32();
      std::vector<float> z(xs.size()), y(xs.size());
      for (std::size_t i = 0; i < xs.size(); ++i) {
        z[i] = round(xs[i] + bs[i % bs.size()]);
        y[i] = round(geluOf(z[i]));
      }
      store(outputs.at(0), x.shape(), dtype, std::move(z));
      return store(outputs.at(1), x.shape(), dtype, std::move(y));
    }
    case FusedPattern::kElementwise: {
      const Shape shape = *fusedChainShape(group, inputs);
      return store(outputs.at(0), shape, dtype, chainValues(group, inputs, shape, round));
    }
  }
}

}  // namespace meshflow::runtime::cpu
