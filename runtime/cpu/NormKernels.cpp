// Softmax and layer normalisation over the last dimension, with their gradients.
// Row statistics accumulate in double, in element order.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "runtime/cpu/FastMath.h"
#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

struct Rows {
  std::int64_t count = 0;  // product of the leading dimensions
  std::int64_t width = 0;  // the last dimension
};

Rows rowsOf(const KernelArgs& args, const Tensor& x) {
  if (x.rank() == 0) args.fail("needs a tensor of rank 1 or more, got " + x.typeText());
  std::int64_t width = x.dim(-1);
  return {width == 0 ? 0 : x.elements() / width, width};
}

void expectSameShape(const KernelArgs& args, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    args.fail(fmt::format("shapes differ: {} and {}", a.typeText(), b.typeText()));
}

void expectVector(const KernelArgs& args, const Tensor& v, std::int64_t n, const char* what) {
  if (v.shape() != Shape{n})
    args.fail(fmt::format("{} must be f32[{}], got {}", what, n, v.typeText()));
}

struct Moments {
  double mean = 0;
  double rstd = 0;  // 1 / sqrt(biased variance + eps)
};

Moments momentsOf(const float* row, std::int64_t n, double eps) {
  double sum = 0;
  for (std::int64_t j = 0; j < n; ++j) sum += row[j];
  double mean = sum / static_cast<double>(n);
  double squares = 0;
  for (std::int64_t j = 0; j < n; ++j) squares += (row[j] - mean) * (row[j] - mean);
  return {mean, 1.0 / std::sqrt(squares / static_cast<double>(n) + eps)};
}

}  // namespace

void softmax(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.f32(0);
  Rows rows = rowsOf(args, x);
  Tensor& y = args.outF32(0, x.shape());
  for (std::int64_t r = 0; r < rows.count; ++r) {
    const float* in = x.f32().data() + r * rows.width;
    float* out = y.f32().data() + r * rows.width;
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j < rows.width; ++j) max = std::max(max, in[j]);
    for (std::int64_t j = 0; j < rows.width; ++j) out[j] = expNonPositive(in[j] - max);
    double sum = 0;  // in order: the same rounding on every device
    for (std::int64_t j = 0; j < rows.width; ++j) sum += out[j];
    auto inverse = static_cast<float>(1.0 / sum);
    for (std::int64_t j = 0; j < rows.width; ++j) out[j] *= inverse;
  }
}

void softmaxGrad(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& y = args.f32(0);
  const Tensor& dy = args.f32(1);
  expectSameShape(args, y, dy);
  Rows rows = rowsOf(args, y);
  Tensor& dx = args.outF32(0, y.shape());
  for (std::int64_t r = 0; r < rows.count; ++r) {
    const float* ys = y.f32().data() + r * rows.width;
    const float* ds = dy.f32().data() + r * rows.width;
    float* out = dx.f32().data() + r * rows.width;
    double dot = 0;
    for (std::int64_t j = 0; j < rows.width; ++j) dot += static_cast<double>(ys[j]) * ds[j];
    for (std::int64_t j = 0; j < rows.width; ++j)
      out[j] = static_cast<float>(ys[j] * (ds[j] - dot));
  }
}

void layerNorm(const KernelArgs& args) {
  args.expectArity(3, 1);
  const Tensor& x = args.f32(0);
  Rows rows = rowsOf(args, x);
  const Tensor& gamma = args.f32(1);
  const Tensor& beta = args.f32(2);
  expectVector(args, gamma, rows.width, "gamma");
  expectVector(args, beta, rows.width, "beta");
  double eps = args.doubleAttr("eps", 1e-5);
  Tensor& y = args.outF32(0, x.shape());
  const float* g = gamma.f32().data();
  const float* b = beta.f32().data();
  for (std::int64_t r = 0; r < rows.count; ++r) {
    const float* in = x.f32().data() + r * rows.width;
    float* out = y.f32().data() + r * rows.width;
    Moments m = momentsOf(in, rows.width, eps);
    for (std::int64_t j = 0; j < rows.width; ++j)
      out[j] = static_cast<float>((in[j] - m.mean) * m.rstd * g[j] + b[j]);
  }
}

void layerNormGrad(const KernelArgs& args) {
  args.expectArity(3, 3);
  const Tensor& x = args.f32(0);
  const Tensor& gamma = args.f32(1);
  const Tensor& dy = args.f32(2);
  Rows rows = rowsOf(args, x);
  expectVector(args, gamma, rows.width, "gamma");
  expectSameShape(args, x, dy);
  double eps = args.doubleAttr("eps", 1e-5);
  Tensor& dx = args.outF32(0, x.shape());
  Tensor& dgamma = args.outF32(1, {rows.width});
  Tensor& dbeta = args.outF32(2, {rows.width});
  const float* g = gamma.f32().data();
  std::vector<double> dg(static_cast<std::size_t>(rows.width), 0.0);
  std::vector<double> db(static_cast<std::size_t>(rows.width), 0.0);
  std::vector<double> xhat(static_cast<std::size_t>(rows.width));
  for (std::int64_t r = 0; r < rows.count; ++r) {
    const float* in = x.f32().data() + r * rows.width;
    const float* d = dy.f32().data() + r * rows.width;
    float* out = dx.f32().data() + r * rows.width;
    Moments m = momentsOf(in, rows.width, eps);
    // dx = rstd · (dxhat - mean(dxhat) - xhat · mean(dxhat · xhat)), dxhat = dy · gamma.
    double meanD = 0, meanDX = 0;
    for (std::int64_t j = 0; j < rows.width; ++j) {
      auto k = static_cast<std::size_t>(j);
      xhat[k] = (in[j] - m.mean) * m.rstd;
      double dxhat = static_cast<double>(d[j]) * g[j];
      meanD += dxhat;
      meanDX += dxhat * xhat[k];
      dg[k] += d[j] * xhat[k];
      db[k] += d[j];
    }
    meanD /= static_cast<double>(rows.width);
    meanDX /= static_cast<double>(rows.width);
    for (std::int64_t j = 0; j < rows.width; ++j) {
      auto k = static_cast<std::size_t>(j);
      double dxhat = static_cast<double>(d[j]) * g[j];
      out[j] = static_cast<float>(m.rstd * (dxhat - meanD - xhat[k] * meanDX));
    }
  }
  for (std::int64_t j = 0; j < rows.width; ++j) {
    dgamma.f32()[static_cast<std::size_t>(j)] = static_cast<float>(dg[static_cast<std::size_t>(j)]);
    dbeta.f32()[static_cast<std::size_t>(j)] = static_cast<float>(db[static_cast<std::size_t>(j)]);
  }
}

}  // namespace meshflow::runtime::cpu
