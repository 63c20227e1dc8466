// The kernels of a mixture of experts: the top-k gate and its gradient, and
// the capacity-limited dispatch of tokens to experts, the combine back, the
// dropped count and their gradients (docs/graph-ir.md, "Mixture of experts").
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

namespace meshflow::runtime::cpu {
namespace {

constexpr std::int32_t kNotRouted = -1;

// Where each (token, expert) choice of gates[B, S, E] goes: its slot in the
// expert's buffer of its group, or kNotRouted for a zero gate or a choice past
// the capacity. Tokens claim slots in order (s ascending, then e ascending),
// so the routing is deterministic and the same on every device that holds the
// group: a group is one row b of the batch, and an expert's slots depend only
// on that expert's column, which is why splitting B or E needs no exchange.
struct Routing {
  std::int64_t groups = 0, tokens = 0, experts = 0, capacity = 0;
  std::vector<std::int32_t> slot;  // [B, S, E]
  std::int64_t dropped = 0;

  std::int64_t choice(std::int64_t b, std::int64_t s, std::int64_t e) const {
    return (b * tokens + s) * experts + e;
  }
  /// Row of the slot of choice (b, s, e) in a [E, B*capacity, h] tensor.
  std::int64_t row(std::int64_t b, std::int64_t s, std::int64_t e) const {
    return e * groups * capacity + b * capacity + slot[choice(b, s, e)];
  }
};

Routing route(const KernelArgs& args, const Tensor& gates) {
  if (gates.rank() != 3) args.fail("needs gates [B, S, E], got " + gates.typeText());
  Routing r{gates.dim(0), gates.dim(1), gates.dim(2), args.intAttr("capacity"), {}, 0};
  if (r.capacity < 1) args.fail(fmt::format("capacity = {}", r.capacity));
  r.slot.assign(static_cast<std::size_t>(gates.elements()), kNotRouted);
  std::vector<std::int64_t> used(static_cast<std::size_t>(r.experts));
  const float* g = gates.f32().data();
  for (std::int64_t b = 0; b < r.groups; ++b) {
    std::fill(used.begin(), used.end(), 0);
    for (std::int64_t s = 0; s < r.tokens; ++s) {
      for (std::int64_t e = 0; e < r.experts; ++e) {
        std::int64_t c = r.choice(b, s, e);
        if (g[c] == 0.0f) continue;
        if (used[e] < r.capacity) {
          r.slot[c] = static_cast<std::int32_t>(used[e]++);
        } else {
          ++r.dropped;
        }
      }
    }
  }
  return r;
}

/// Fails unless `t` is [E, B*capacity, h] for the routing; returns h.
std::int64_t expectSlots(const KernelArgs& args, const Tensor& t, const Routing& r) {
  if (t.rank() != 3 || t.dim(0) != r.experts || t.dim(1) != r.groups * r.capacity)
    args.fail(fmt::format("expert tensor {} does not match {} experts x {} groups x capacity {}",
                          t.typeText(), r.experts, r.groups, r.capacity));
  return t.dim(2);
}

/// Fails unless `t` is [B, S, h]; returns h.
std::int64_t expectTokens(const KernelArgs& args, const Tensor& t, const Routing& r) {
  if (t.rank() != 3 || t.dim(0) != r.groups || t.dim(1) != r.tokens)
    args.fail(fmt::format("tokens {} do not match gates of {} groups x {} tokens", t.typeText(),
                          r.groups, r.tokens));
  return t.dim(2);
}

Tensor& zeroedOut(const KernelArgs& args, std::size_t i, const Shape& shape) {
  Tensor& t = args.outF32(i, shape);
  std::fill(t.f32().begin(), t.f32().end(), 0.0f);
  return t;
}

// tokens[b, s] += weight(b, s, e) · slots[row(b, s, e)] over the kept choices,
// experts in ascending order (the gather of combine and of dispatch's gradient).
template <class Weight>
void gatherSlots(const Routing& r, const Tensor& slots, Tensor& tokens, std::int64_t h,
                 Weight weight) {
  const float* in = slots.f32().data();
  float* out = tokens.f32().data();
  for (std::int64_t b = 0; b < r.groups; ++b)
    for (std::int64_t s = 0; s < r.tokens; ++s) {
      float* o = out + (b * r.tokens + s) * h;
      for (std::int64_t e = 0; e < r.experts; ++e) {
        if (r.slot[r.choice(b, s, e)] == kNotRouted) continue;
        float w = weight(b, s, e);
        const float* y = in + r.row(b, s, e) * h;
        for (std::int64_t j = 0; j < h; ++j) o[j] += w * y[j];
      }
    }
}

// slots[row(b, s, e)] = weight(b, s, e) · tokens[b, s] for the kept choices
// (the scatter of dispatch and of combine's gradient); other slots stay 0.
template <class Weight>
void scatterTokens(const Routing& r, const Tensor& tokens, Tensor& slots, std::int64_t h,
                   Weight weight) {
  const float* in = tokens.f32().data();
  float* out = slots.f32().data();
  for (std::int64_t b = 0; b < r.groups; ++b)
    for (std::int64_t s = 0; s < r.tokens; ++s)
      for (std::int64_t e = 0; e < r.experts; ++e) {
        if (r.slot[r.choice(b, s, e)] == kNotRouted) continue;
        float w = weight(b, s, e);
        const float* x = in + (b * r.tokens + s) * h;
        float* d = out + r.row(b, s, e) * h;
        for (std::int64_t j = 0; j < h; ++j) d[j] = w * x[j];
      }
}

}  // namespace

void moeDispatch(const KernelArgs& args) {
  args.expectArity(2, 1);
  Routing r = route(args, args.f32(1));
  const Tensor& x = args.f32(0);
  std::int64_t h = expectTokens(args, x, r);
  Tensor& d = zeroedOut(args, 0, {r.experts, r.groups * r.capacity, h});
  scatterTokens(r, x, d, h, [](auto...) { return 1.0f; });
}

void moeCombine(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& gates = args.f32(1);
  Routing r = route(args, gates);
  const Tensor& y = args.f32(0);
  std::int64_t h = expectSlots(args, y, r);
  Tensor& out = zeroedOut(args, 0, {r.groups, r.tokens, h});
  const float* g = gates.f32().data();
  gatherSlots(r, y, out, h,
              [&](std::int64_t b, std::int64_t s, std::int64_t e) { return g[r.choice(b, s, e)]; });
}

void moeDropped(const KernelArgs& args) {
  args.expectArity(1, 1);
  Routing r = route(args, args.f32(0));
  args.outF32(0, {}).f32()[0] = static_cast<float>(r.dropped);
}

// Dispatch copies; its gradient gathers each kept slot's gradient back to its
// token (the gates only choose, so they get none).
void moeDispatchGrad(const KernelArgs& args) {
  args.expectArity(2, 1);
  Routing r = route(args, args.f32(1));
  const Tensor& dd = args.f32(0);
  std::int64_t h = expectSlots(args, dd, r);
  Tensor& dx = zeroedOut(args, 0, {r.groups, r.tokens, h});
  gatherSlots(r, dd, dx, h, [](auto...) { return 1.0f; });
}

// out[b, s] = Σ_e g[b, s, e] · y[slot]: dy[slot] = g · dout[b, s] and
// dg[b, s, e] = dout[b, s] · y[slot] for the kept choices, 0 for the others
// (a dropped choice does not reach the output).
void moeCombineGrad(const KernelArgs& args) {
  args.expectArity(3, 2);
  const Tensor& gates = args.f32(1);
  Routing r = route(args, gates);
  const Tensor& y = args.f32(0);
  const Tensor& dout = args.f32(2);
  std::int64_t h = expectSlots(args, y, r);
  if (expectTokens(args, dout, r) != h)
    args.fail(fmt::format("dout {} does not match {}", dout.typeText(), y.typeText()));
  const float* g = gates.f32().data();
  Tensor& dy = zeroedOut(args, 0, y.shape());
  scatterTokens(r, dout, dy, h, [&](std::int64_t b, std::int64_t s, std::int64_t e) {
    return g[r.choice(b, s, e)];
  });
  Tensor& dgates = zeroedOut(args, 1, gates.shape());
  const float* yv = y.f32().data();
  const float* dv = dout.f32().data();
  float* dg = dgates.f32().data();
  for (std::int64_t b = 0; b < r.groups; ++b)
    for (std::int64_t s = 0; s < r.tokens; ++s)
      for (std::int64_t e = 0; e < r.experts; ++e) {
        std::int64_t c = r.choice(b, s, e);
        if (r.slot[c] == kNotRouted) continue;
        const float* yr = yv + r.row(b, s, e) * h;
        const float* dr = dv + (b * r.tokens + s) * h;
        double dot = 0;
        for (std::int64_t j = 0; j < h; ++j) dot += static_cast<double>(dr[j]) * yr[j];
        dg[c] = static_cast<float>(dot);
      }
}

}  // namespace meshflow::runtime::cpu
