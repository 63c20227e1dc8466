// The causal mask of self-attention scores and its gradient.
#include <fmt/format.h>

#include <algorithm>

#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

// The masked value: large enough that softmax gives it weight 0 in fp32, finite
// so that masked rows never produce inf - inf.
constexpr float kMasked = -1e9f;

}  // namespace

// CausalMask: scores[..., s, s] with the entries above the diagonal (key j >
// query i) set to -1e9. CausalMaskGrad: dy with those entries set to 0, since
// the forward output does not depend on them.
void causalMask(const KernelArgs& args) {
  args.expectArity(1, 1);
  const Tensor& x = args.f32(0);
  if (x.rank() < 2 || x.dim(-1) != x.dim(-2))
    args.fail("needs scores[..., s, s], got " + x.typeText());
  float fill = args.op.kind == ir::OpKind::CausalMaskGrad ? 0.0f : kMasked;
  std::int64_t s = x.dim(-1);
  Tensor& y = args.outF32(0, x.shape());
  const float* in = x.f32().data();
  float* out = y.f32().data();
  // Row i keeps its first i + 1 entries and fills the rest.
  for (std::int64_t m = 0; m < (s == 0 ? 0 : x.elements() / (s * s)); ++m)
    for (std::int64_t i = 0; i < s; ++i) {
      std::int64_t row = (m * s + i) * s;
      std::copy_n(in + row, i + 1, out + row);
      std::fill(out + row + i + 1, out + row + s, fill);
    }
}

}  // namespace meshflow::runtime::cpu
