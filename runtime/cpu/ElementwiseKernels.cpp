// Constants, broadcasting binary ops, unary activations and their gradients,
// and dropout.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/cpu/FastMath.h"
#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

float geluDerivative(float x) {
  float t = fastTanh(kGeluC * (x + kGeluA * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3.0f * kGeluA * x * x);
}

// The splitmix64 finaliser: a bijective mix with good avalanche.
std::uint64_t mix(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// `f` is a lambda, never a function pointer: each lambda is its own type, so
// each op gets its own instantiation with `f` inlined and the loop vectorised.
// A pointer (`mapUnary(args, geluOf)`) made GeLU, tanh and sigmoid share one
// instantiation that called through it per element — 4 ns an element.
template <class F>
void mapUnary(const KernelArgs& args, F f) {
  const Tensor& x = args.f32(0);
  Tensor& y = args.outF32(0, x.shape());
  auto in = x.f32();
  auto out = y.f32();
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = f(in[i]);
}

// dx = dy · f(v), where v is the forward input or output the gradient needs.
template <class F>
void mapGrad(const KernelArgs& args, F f) {
  args.expectArity(2, 1);
  const Tensor& v = args.f32(0);
  const Tensor& dy = args.f32(1);
  if (v.shape() != dy.shape())
    args.fail(fmt::format("shapes differ: {} and {}", v.typeText(), dy.typeText()));
  Tensor& dx = args.outF32(0, v.shape());
  auto vs = v.f32();
  auto ds = dy.f32();
  auto out = dx.f32();
  for (std::size_t i = 0; i < vs.size(); ++i) out[i] = ds[i] * f(vs[i]);
}

// y = x · mask / (1 - p) for the mask of (seed, forward op, step).
void applyDropout(const KernelArgs& args, std::uint64_t forwardOp) {
  args.expectArity(1, 1);
  const Tensor& x = args.f32(0);
  double p = args.doubleAttr("p");
  if (p < 0 || p > 1) args.fail(fmt::format("p = {} is not a probability", p));
  auto seed = static_cast<std::uint64_t>(args.intAttr("seed", 0));
  Tensor& y = args.outF32(0, x.shape());
  auto in = x.f32();
  auto out = y.f32();
  // p = 1 drops everything; the scale would be infinite, and 0 · inf is NaN.
  float scale = p < 1 ? static_cast<float>(1.0 / (1.0 - p)) : 0.0f;
  for (std::size_t i = 0; i < in.size(); ++i)
    out[i] = dropoutKeep(seed, forwardOp, args.ctx.step, args.ctx.elementOffset + i, p) ? in[i] * scale : 0.0f;
}

}  // namespace

bool dropoutKeep(std::uint64_t seed, std::uint64_t opIndex, std::int64_t step, std::uint64_t index,
                 double p) {
  std::uint64_t h = mix(seed);
  h = mix(h ^ opIndex);
  h = mix(h ^ static_cast<std::uint64_t>(step));
  h = mix(h ^ index);
  double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return u >= p;
}

void constant(const KernelArgs& args) {
  args.expectArity(0, 1);
  float value = static_cast<float>(args.doubleAttr("value"));
  // A preallocated output keeps its shape (a constant may be bound to one);
  // otherwise the constant is the f32 scalar of the contract.
  Tensor& y = args.rawOut(0).allocated() ? args.rawOut(0) : args.outF32(0, {});
  if (y.dtype() != ir::DType::F32) args.fail("output must be f32, got " + y.typeText());
  std::fill(y.f32().begin(), y.f32().end(), value);
}

void binary(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& a = args.f32(0);
  const Tensor& b = args.f32(1);
  auto shape = broadcastShapes(a.shape(), b.shape());
  if (!shape) args.fail(fmt::format("cannot broadcast {} with {}", a.typeText(), b.typeText()));
  Tensor& y = args.outF32(0, *shape);
  auto sa = broadcastStrides(a.shape(), *shape);
  auto sb = broadcastStrides(b.shape(), *shape);
  const float* pa = a.f32().data();
  const float* pb = b.f32().data();
  float* py = y.f32().data();
  auto run = [&](auto op) {
    walk(*shape, sa, sb,
         [&](std::int64_t i, std::int64_t ia, std::int64_t ib) { py[i] = op(pa[ia], pb[ib]); });
  };
  switch (args.op.kind) {
    case ir::OpKind::Add:
      run([](float x, float z) { return x + z; });
      break;
    case ir::OpKind::Sub:
      run([](float x, float z) { return x - z; });
      break;
    case ir::OpKind::Mul:
      run([](float x, float z) { return x * z; });
      break;
    case ir::OpKind::Div:
      run([](float x, float z) { return x / z; });
      break;
    default:
      args.fail("not a binary op");
  }
}

void unary(const KernelArgs& args) {
  args.expectArity(1, 1);
  switch (args.op.kind) {
    case ir::OpKind::Neg:
      return mapUnary(args, [](float x) { return -x; });
    case ir::OpKind::Relu:
      return mapUnary(args, [](float x) { return x > 0 ? x : 0.0f; });
    case ir::OpKind::Gelu:
      return mapUnary(args, [](float x) { return geluOf(x); });
    case ir::OpKind::Tanh:
      return mapUnary(args, [](float x) { return fastTanh(x); });
    case ir::OpKind::Sigmoid:
      return mapUnary(args, [](float x) { return sigmoidOf(x); });
    case ir::OpKind::Exp:
      return mapUnary(args, [](float x) { return std::exp(x); });
    case ir::OpKind::Rsqrt: {
      float eps = static_cast<float>(args.doubleAttr("eps"));
      return mapUnary(args, [eps](float x) { return 1.0f / std::sqrt(x + eps); });
    }
    case ir::OpKind::Scale: {
      float factor = static_cast<float>(args.doubleAttr("factor"));
      return mapUnary(args, [factor](float x) { return x * factor; });
    }
    default:
      args.fail("not a unary op");
  }
}

void unaryGrad(const KernelArgs& args) {
  switch (args.op.kind) {
    case ir::OpKind::ReluGrad:
      return mapGrad(args, [](float x) { return x > 0 ? 1.0f : 0.0f; });
    case ir::OpKind::GeluGrad:
      return mapGrad(args, [](float x) { return geluDerivative(x); });
    case ir::OpKind::TanhGrad:
      return mapGrad(args, [](float y) { return 1.0f - y * y; });
    case ir::OpKind::SigmoidGrad:
      return mapGrad(args, [](float y) { return y * (1.0f - y); });
    default:
      args.fail("not a unary gradient op");
  }
}

void dropout(const KernelArgs& args) { applyDropout(args, args.ctx.opIndex); }

void dropoutGrad(const KernelArgs& args) {
  // The mask is the forward op's: its id comes from the `forward_op` attribute,
  // or else from the op's link to the forward op it differentiates.
  std::int64_t forwardOp = -1;
  if (args.hasAttr("forward_op"))
    forwardOp = args.intAttr("forward_op");
  else if (args.op.forwardOp)
    forwardOp = *args.op.forwardOp;
  if (forwardOp < 0) args.fail("needs the forward op (attribute `forward_op`)");
  applyDropout(args, static_cast<std::uint64_t>(forwardOp));
}

}  // namespace meshflow::runtime::cpu
