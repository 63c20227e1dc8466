// Helpers for the kernel tests: run one op on tensors, and check a gradient
// against central finite differences.
#pragma once

#include <catch2/catch.hpp>
#include <cmath>
#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"

namespace kernel_test {

using meshflow::ir::Attributes;
using meshflow::ir::OpKind;
using meshflow::runtime::Shape;
using meshflow::runtime::Tensor;
using meshflow::runtime::cpu::KernelContext;

/// A tensor like `t` (dtype and shape) full of garbage: NaN for f32.
inline Tensor poisoned(const Tensor& t) {
  Tensor p = Tensor::uninitialized(t.dtype(), t.shape());
  if (t.dtype() == meshflow::ir::DType::F32)
    std::fill(p.f32().begin(), p.f32().end(), std::numeric_limits<float>::quiet_NaN());
  else if (t.dtype() != meshflow::ir::DType::I32)  // all ones: NaN in f16 and bf16
    std::fill(p.raw().begin(), p.raw().end(), std::byte{0xff});
  else
    std::fill(p.i32().begin(), p.i32().end(), 0x5a5a5a5a);
  return p;
}

/// Runs an op of `kind` with `attrs` on `inputs`; returns its `outputs` outputs.
/// Runs it a second time into outputs full of garbage and requires the same
/// bits: runtimes allocate outputs uninitialised, so every kernel must write
/// each element of its outputs (runtime/cpu/Kernels.h).
inline std::vector<Tensor> runOp(OpKind kind, const std::vector<Tensor>& inputs,
                                 Attributes attrs = {}, std::size_t outputs = 1,
                                 KernelContext ctx = {}) {
  meshflow::ir::Op op{kind, {}, {}, std::move(attrs), "", {}, meshflow::ir::Phase::Forward, {}};
  std::vector<const Tensor*> in;
  for (const auto& t : inputs) in.push_back(&t);
  std::vector<Tensor> results(outputs);
  std::vector<Tensor*> out;
  for (auto& t : results) out.push_back(&t);
  meshflow::runtime::cpu::runKernel(op, in, out, ctx);
  std::vector<Tensor> again;
  for (const auto& t : results) again.push_back(poisoned(t));
  out.clear();
  for (auto& t : again) out.push_back(&t);
  meshflow::runtime::cpu::runKernel(op, in, out, ctx);
  for (std::size_t i = 0; i < outputs; ++i) {
    INFO(meshflow::ir::opName(kind) << " output " << i
                                    << " depends on what the output held before");
    REQUIRE(again[i].bitEqual(results[i]));
  }
  return results;
}

inline Tensor run1(OpKind kind, const std::vector<Tensor>& inputs, Attributes attrs = {},
                   KernelContext ctx = {}) {
  return runOp(kind, inputs, std::move(attrs), 1, ctx).at(0);
}

inline std::vector<float> values(const Tensor& t) { return {t.f32().begin(), t.f32().end()}; }

/// Element-wise comparison with Approx, reporting the first index that differs.
inline void checkValues(const Tensor& actual, const std::vector<float>& expected,
                        double epsilon = 1e-5) {
  REQUIRE(actual.f32().size() == expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    INFO("element " << i);
    CHECK(actual.f32()[i] == Approx(expected[i]).epsilon(epsilon).margin(1e-6));
  }
}

/// A forward computation with one or more outputs.
using Forward = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Checks `analytic` against the central difference of L(x) = Σ_k Σ dy_k · f_k(x)
/// with respect to inputs[which], element by element (L accumulated in double):
/// |analytic - numeric| <= atol + rtol · max(|analytic|, |numeric|).
inline void checkGradient(const Forward& f, std::vector<Tensor> inputs, std::size_t which,
                          const std::vector<Tensor>& dys, const Tensor& analytic, double h = 1e-2,
                          double rtol = 1e-2, double atol = 2e-3) {
  auto loss = [&](const std::vector<Tensor>& x) {
    auto ys = f(x);
    REQUIRE(ys.size() == dys.size());
    double sum = 0;
    for (std::size_t k = 0; k < ys.size(); ++k) {
      REQUIRE(ys[k].shape() == dys[k].shape());
      for (std::size_t i = 0; i < ys[k].f32().size(); ++i)
        sum += static_cast<double>(dys[k].f32()[i]) * ys[k].f32()[i];
    }
    return sum;
  };
  REQUIRE(analytic.shape() == inputs[which].shape());
  for (std::size_t i = 0; i < inputs[which].f32().size(); ++i) {
    float original = inputs[which].f32()[i];
    inputs[which].f32()[i] = original + static_cast<float>(h);
    double plus = loss(inputs);
    inputs[which].f32()[i] = original - static_cast<float>(h);
    double minus = loss(inputs);
    inputs[which].f32()[i] = original;
    double numeric = (plus - minus) / (2 * h);
    double exact = analytic.f32()[i];
    INFO("input " << which << ", element " << i << ": analytic " << exact << ", numeric "
                  << numeric);
    CHECK(std::abs(exact - numeric) <= atol + rtol * std::max(std::abs(exact), std::abs(numeric)));
  }
}

/// The single-output form.
inline void checkGradient1(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                           std::vector<Tensor> inputs, std::size_t which, const Tensor& dy,
                           const Tensor& analytic) {
  checkGradient([&](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x)}; },
                std::move(inputs), which, {dy}, analytic);
}

}  // namespace kernel_test
