// The top-k gate of a mixture of experts and its gradient.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {

// gates = softmax over the k largest logits of each row, 0 elsewhere. Ties go
// to the lower expert index, so the choice is deterministic.
void topKGate(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& logits = args.f32(0);
  if (logits.rank() == 0) args.fail("needs logits[..., E], got a scalar");
  std::int64_t experts = logits.dim(-1);
  std::int64_t k = args.intAttr("k");
  if (k < 1 || k > experts) args.fail(fmt::format("k = {} with {} experts", k, experts));
  Tensor& gates = args.outF32(0, logits.shape());
  std::fill(gates.f32().begin(), gates.f32().end(), 0.0f);
  std::vector<std::int64_t> order(static_cast<std::size_t>(experts));
  std::int64_t rows = experts == 0 ? 0 : logits.elements() / experts;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = logits.f32().data() + r * experts;
    float* out = gates.f32().data() + r * experts;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [in](std::int64_t a, std::int64_t b) {
                        return in[a] > in[b] || (in[a] == in[b] && a < b);
                      });
    float max = in[order[0]];
    double sum = 0;
    for (std::int64_t i = 0; i < k; ++i) sum += std::exp(static_cast<double>(in[order[i]]) - max);
    for (std::int64_t i = 0; i < k; ++i)
      out[order[i]] = static_cast<float>(std::exp(static_cast<double>(in[order[i]]) - max) / sum);
  }
}

// The choice of experts is piecewise constant, so only the softmax over the
// chosen ones has a gradient: dlogits_i = g_i (dg_i - Σ_j g_j dg_j), which is 0
// wherever g_i is. The gates carry the choice, so the logits are only checked.
void topKGateGrad(const KernelArgs& args) {
  args.expectArity(3, 1);
  const Tensor& logits = args.f32(0);
  const Tensor& gates = args.f32(1);
  const Tensor& dgates = args.f32(2);
  if (logits.rank() == 0 || gates.shape() != logits.shape() || dgates.shape() != logits.shape())
    args.fail(fmt::format("logits {}, gates {} and dgates {} must share one shape",
                          logits.typeText(), gates.typeText(), dgates.typeText()));
  std::int64_t experts = logits.dim(-1);
  Tensor& dlogits = args.outF32(0, logits.shape());
  std::int64_t rows = experts == 0 ? 0 : logits.elements() / experts;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* g = gates.f32().data() + r * experts;
    const float* dg = dgates.f32().data() + r * experts;
    float* out = dlogits.f32().data() + r * experts;
    double dot = 0;
    for (std::int64_t j = 0; j < experts; ++j) dot += static_cast<double>(g[j]) * dg[j];
    for (std::int64_t j = 0; j < experts; ++j) out[j] = static_cast<float>(g[j] * (dg[j] - dot));
  }
}

}  // namespace meshflow::runtime::cpu
