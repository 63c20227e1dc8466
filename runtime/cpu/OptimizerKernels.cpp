// Gradient clipping and the optimizer updates.
//
// The gradient an update uses is g · scale (scale is ClipScale's output, or 1).
// Weight decay: SGD and Adam (decoupled = 0) add weight_decay · w to that
// gradient, so it passes through the moments ("L2 regularisation"); AdamW
// (decoupled = 1) subtracts lr · weight_decay · w from the weight directly,
// outside the adaptive step (Loshchilov & Hutter).
#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <span>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

float scalarInput(const KernelArgs& args, std::size_t i, const char* what) {
  const Tensor& t = args.f32(i);
  if (t.elements() != 1) args.fail(fmt::format("{} must be a scalar, got {}", what, t.typeText()));
  return t.f32()[0];
}

void expectShapeOf(const KernelArgs& args, const Tensor& w, std::size_t i, const char* what) {
  const Tensor& t = args.f32(i);
  if (t.shape() != w.shape())
    args.fail(fmt::format("{} is {} but the weight is {}", what, t.typeText(), w.typeText()));
}

// A NaN scale is ClipScale's verdict that a loss-scaled gradient overflowed:
// the step is skipped, so each output keeps what it replaces (input 0, 3 or
// 4). In place there is nothing to do; otherwise the output shares the
// input's elements (copy on write).
bool skipOverflowedStep(const KernelArgs& args, float scale) {
  if (!std::isnan(scale)) return false;
  for (std::size_t j = 0; j < args.outputCount(); ++j) {
    const Tensor& kept = args.f32(j == 0 ? 0 : j + 2);
    Tensor& out = args.rawOut(j);
    if (&out != &kept) out = kept;
  }
  return true;
}

struct AdamSpans {
  std::span<const float> w, g, m, v;
  std::span<float> wOut, mOut, vOut;
};

struct AdamConstants {
  float scale, beta1, beta2, correction1, correction2, eps, decay, lr;
};

// One loop per weight-decay form, so no lane tests a flag. In place, as
// sgdUpdate: each element is read before it is written at the same index.
template <bool Decoupled>
void adamLoop(const AdamSpans& s, const AdamConstants& k) {
  const std::size_t n = s.w.size();
#pragma GCC ivdep
  for (std::size_t i = 0; i < n; ++i) {
    float g = s.g[i] * k.scale + (Decoupled ? 0.0f : k.decay * s.w[i]);
    float m = k.beta1 * s.m[i] + (1.0f - k.beta1) * g;
    float v = k.beta2 * s.v[i] + (1.0f - k.beta2) * g * g;
    float step = (m / k.correction1) / (std::sqrt(v / k.correction2) + k.eps);
    if constexpr (Decoupled) step += k.decay * s.w[i];
    s.mOut[i] = m;
    s.vOut[i] = v;
    s.wOut[i] = s.w[i] - k.lr * step;
  }
}

}  // namespace

void globalNorm(const KernelArgs& args) {
  if (args.outputCount() != 1) args.fail("expects one output");
  double squares = 0;
  for (std::size_t i = 0; i < args.inputCount(); ++i)
    for (float g : args.f32(i).f32()) squares += static_cast<double>(g) * g;
  // `squared`: the sum of squares itself (the runtime's clipping adds
  // devices' sums before the root), else the norm.
  args.outF32(0, {}).f32()[0] = static_cast<float>(args.intAttr("squared", 0) != 0 ? squares : std::sqrt(squares));
}

void clipScale(const KernelArgs& args) {
  if (args.inputCount() == 2) return unscaleAndClip(args);
  args.expectArity(1, 1);
  double norm = scalarInput(args, 0, "norm");
  double clipNorm = args.doubleAttr("clip_norm");
  args.outF32(0, {}).f32()[0] = static_cast<float>(std::min(1.0, clipNorm / (norm + 1e-6)));
}

// With a loss scale: the gradients' norm is loss_scale times the true norm.
// A non-finite norm means some gradient overflowed (or is NaN), and the NaN
// factor tells every update to skip the step.
void unscaleAndClip(const KernelArgs& args) {
  args.expectArity(2, 1);
  double norm = scalarInput(args, 0, "norm");
  double lossScale = scalarInput(args, 1, "loss_scale");
  double clipNorm = args.doubleAttr("clip_norm", 0.0);
  double factor = std::numeric_limits<double>::quiet_NaN();
  if (std::isfinite(norm)) {
    double clip = clipNorm > 0 ? std::min(1.0, clipNorm / (norm / lossScale + 1e-6)) : 1.0;
    factor = clip / lossScale;
  }
  args.outF32(0, {}).f32()[0] = static_cast<float>(factor);
}

// Dynamic loss scaling (Micikevicius et al. 2018, and PyTorch's GradScaler):
// an overflow halves the scale and restarts the count of good steps; `window`
// good steps in a row double it.
void lossScaleUpdate(const KernelArgs& args) {
  args.expectArity(3, 2);
  float scale = scalarInput(args, 0, "loss_scale");
  const Tensor& counts = args.f32(1);
  if (counts.elements() != 2) args.fail("counts must be f32[2], got " + counts.typeText());
  float factor = scalarInput(args, 2, "factor");
  std::int64_t window = args.intAttr("window");
  float good = counts.f32()[0], skipped = counts.f32()[1];
  if (std::isnan(factor)) {
    scale = std::max(1.0f, scale / 2);
    good = 0;
    skipped += 1;
  } else if (++good >= static_cast<float>(window)) {
    scale *= 2;
    good = 0;
  }
  args.outF32(0, {}).f32()[0] = scale;
  auto out = args.outF32(1, {2}).f32();
  out[0] = good;
  out[1] = skipped;
}

// m' = momentum · m + (g · scale + weight_decay · w);  w' = w - lr · m'.
void sgdUpdate(const KernelArgs& args) {
  args.expectArity(4, 2);
  const Tensor& w = args.f32(0);
  expectShapeOf(args, w, 1, "the gradient");
  expectShapeOf(args, w, 3, "the momentum");
  float scale = scalarInput(args, 2, "scale");
  if (skipOverflowedStep(args, scale)) return;
  auto lr = static_cast<float>(args.doubleAttr("lr"));
  auto momentum = static_cast<float>(args.doubleAttr("momentum", 0.0));
  auto decay = static_cast<float>(args.doubleAttr("weight_decay", 0.0));
  auto ws = w.f32();
  auto gs = args.f32(1).f32();
  auto ms = args.f32(3).f32();
  auto wOut = args.outF32(0, w.shape()).f32();
  auto mOut = args.outF32(1, w.shape()).f32();
  // The update runs in place (wOut is ws, mOut is ms): each element is read
  // before it is written at the same index, so no iteration depends on another.
  // Without ivdep GCC's aliasing check sends the in-place call to a scalar loop.
#pragma GCC ivdep
  for (std::size_t i = 0; i < ws.size(); ++i) {
    float g = gs[i] * scale + decay * ws[i];
    float m = momentum * ms[i] + g;
    mOut[i] = m;
    wOut[i] = ws[i] - lr * m;
  }
}

// m' = β1 m + (1 - β1) g;  v' = β2 v + (1 - β2) g²;
// w' = w - lr · (m'/(1 - β1^t) / (sqrt(v'/(1 - β2^t)) + eps) + [decoupled] weight_decay · w),
// with t = KernelContext::step and g = g · scale (+ weight_decay · w unless decoupled).
void adamUpdate(const KernelArgs& args) {
  args.expectArity(5, 3);
  const Tensor& w = args.f32(0);
  expectShapeOf(args, w, 1, "the gradient");
  expectShapeOf(args, w, 3, "the first moment");
  expectShapeOf(args, w, 4, "the second moment");
  float scale = scalarInput(args, 2, "scale");
  if (skipOverflowedStep(args, scale)) return;
  if (args.ctx.step < 1) args.fail(fmt::format("step {} (steps count from 1)", args.ctx.step));
  double lr = args.doubleAttr("lr");
  double beta1 = args.doubleAttr("beta1", 0.9);
  double beta2 = args.doubleAttr("beta2", 0.999);
  auto eps = static_cast<float>(args.doubleAttr("eps", 1e-8));
  auto decay = static_cast<float>(args.doubleAttr("weight_decay", 0.0));
  bool decoupled = args.intAttr("decoupled", 0) != 0;
  auto t = static_cast<double>(args.ctx.step);
  auto correction1 = static_cast<float>(1.0 - std::pow(beta1, t));
  auto correction2 = static_cast<float>(1.0 - std::pow(beta2, t));
  AdamSpans spans{w.f32(), args.f32(1).f32(), args.f32(3).f32(), args.f32(4).f32(),
                  args.outF32(0, w.shape()).f32(), args.outF32(1, w.shape()).f32(),
                  args.outF32(2, w.shape()).f32()};
  AdamConstants k{scale, static_cast<float>(beta1), static_cast<float>(beta2), correction1, correction2,
                  eps, decay, static_cast<float>(lr)};
  if (decoupled)
    adamLoop<true>(spans, k);
  else
    adamLoop<false>(spans, k);
}

std::int64_t optimizerStep(const std::map<std::string, Tensor>& state, std::int64_t step) {
  auto counts = state.find("loss_scale.counts");
  if (counts == state.end() || !counts->second.allocated() || counts->second.elements() < 2) return step;
  return step - static_cast<std::int64_t>(counts->second.f32()[1]);
}

}  // namespace meshflow::runtime::cpu
