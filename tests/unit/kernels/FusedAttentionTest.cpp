// The fused attention reference (runtime/cpu/FusedAttention.h) against the
// unfused chain of cpu kernels the standard library's attention traces to:
// MatMul(q, kᵀ) → Scale → CausalMask → Softmax → MatMul(·, v), and the
// backward autodiff gives it (SoftmaxGrad, CausalMaskGrad, Scale and four
// matmuls), on random inputs: multi-head and grouped queries, causal or not.
#include <cmath>
#include <stdexcept>

#include "KernelTestSupport.h"
#include "runtime/cpu/FusedAttention.h"

using namespace kernel_test;
using meshflow::ir::DType;
using meshflow::runtime::allClose;
using meshflow::runtime::maxAbsDiff;
using meshflow::runtime::randomNormal;
namespace cpu = meshflow::runtime::cpu;

namespace {

struct Case {
  const char* name;
  Shape q, kv;  // q [..., r, d]; k and v [..., s, d]
  bool causal;
};

// Softmax over scores [..., r, s] whose rows are r / s groups of s positions
// (grouped queries): viewed as [..., r / s, s, s] for the mask, as the
// standard library's grouped_query_attention views them.
Tensor grouped(const Tensor& scores, std::int64_t s) {
  Shape shape = scores.shape();
  const std::int64_t r = shape[shape.size() - 2];
  shape.insert(shape.end() - 2, r / s);
  shape[shape.size() - 2] = s;
  return scores.reshaped(shape);
}

struct Unfused {
  Tensor out, dq, dk, dv;
};

// The unfused chain, forward and backward, on f32 tensors.
Unfused unfused(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dOut, double scale, bool causal) {
  const std::int64_t s = k.dim(-2);
  Tensor scores = runOp(OpKind::MatMul, {q, k}, {{"transpose_b", std::int64_t{1}}})[0];
  Tensor scaled = runOp(OpKind::Scale, {scores}, {{"factor", scale}})[0];
  Tensor masked = causal ? runOp(OpKind::CausalMask, {grouped(scaled, s)})[0].reshaped(scaled.shape()) : scaled;
  Tensor probs = runOp(OpKind::Softmax, {masked})[0];
  Unfused u;
  u.out = runOp(OpKind::MatMul, {probs, v})[0];
  Tensor dProbs = runOp(OpKind::MatMul, {dOut, v}, {{"transpose_b", std::int64_t{1}}})[0];
  u.dv = runOp(OpKind::MatMul, {probs, dOut}, {{"transpose_a", std::int64_t{1}}})[0];
  Tensor dMasked = runOp(OpKind::SoftmaxGrad, {probs, dProbs})[0];
  Tensor dScaled = causal ? runOp(OpKind::CausalMaskGrad, {grouped(dMasked, s)})[0].reshaped(dMasked.shape())
                          : dMasked;
  Tensor dScores = runOp(OpKind::Scale, {dScaled}, {{"factor", scale}})[0];
  u.dq = runOp(OpKind::MatMul, {dScores, k})[0];
  u.dk = runOp(OpKind::MatMul, {dScores, q}, {{"transpose_a", std::int64_t{1}}})[0];
  return u;
}

// |a - b| <= rtol·|b| + atol·max|b| elementwise, with the figures in the log.
void requireClose(const char* what, const Tensor& actual, const Tensor& expected, double rtol, double atol) {
  double largest = 0;
  const Tensor values = expected.toF32();  // a const view: f32() of a temporary would unshare into it
  for (float x : values.f32()) largest = std::max(largest, double(std::abs(x)));
  INFO(what << ": max |diff| " << maxAbsDiff(actual, expected) << " of values up to " << largest);
  CHECK(allClose(actual.toF32(), expected, rtol, atol * largest));
}

const Case kCases[] = {
    {"multi-head, causal", {2, 3, 16, 8}, {2, 3, 16, 8}, true},
    {"multi-head, not causal", {2, 3, 16, 8}, {2, 3, 16, 8}, false},
    {"grouped queries (3 per key), causal", {2, 2, 36, 4}, {2, 2, 12, 4}, true},
    {"cross attention, not causal", {3, 5, 7}, {3, 9, 7}, false},
    {"one key", {4, 1, 5}, {4, 1, 5}, true},
};

}  // namespace

TEST_CASE("fused attention equals the unfused chain in f32, forward and backward", "[kernels][attention]") {
  std::uint64_t seed = 11;
  for (const Case& c : kCases) {
    INFO(c.name);
    Tensor q = randomNormal(c.q, ++seed), k = randomNormal(c.kv, ++seed), v = randomNormal(c.kv, ++seed);
    Tensor dOut = randomNormal(c.q, ++seed);
    const double scale = 1 / std::sqrt(double(c.q.back()));
    const cpu::AttentionOptions options{scale, c.causal};
    auto fused = cpu::fusedAttention(q, k, v, options);
    Unfused expected = unfused(q, k, v, dOut, scale, c.causal);
    requireClose("out", fused.out, expected.out, 1e-5, 1e-6);
    auto grads = cpu::fusedAttentionGrad(q, k, v, dOut, fused.lse, options);
    requireClose("dq", grads.dq, expected.dq, 1e-4, 1e-5);
    requireClose("dk", grads.dk, expected.dk, 1e-4, 1e-5);
    requireClose("dv", grads.dv, expected.dv, 1e-4, 1e-5);
    CHECK(fused.lse.shape() == Shape(c.q.begin(), c.q.end() - 1));
    // The same bits on a second run (sums in a fixed order).
    auto again = cpu::fusedAttentionGrad(q, k, v, dOut, fused.lse, options);
    CHECK(again.dk.bitEqual(grads.dk));
    CHECK(cpu::fusedAttention(q, k, v, options).out.bitEqual(fused.out));
  }
}

TEST_CASE("fused attention in f16 and bf16 rounds the f32 result once", "[kernels][attention][half]") {
  for (DType dtype : {DType::F16, DType::BF16}) {
    INFO(meshflow::ir::dtypeName(dtype));
    // A half unit in the last place of the type, twice over for the f32
    // computation's own error; dq and dk sum differences of products of
    // rounded operands (softmax's backward), a few units more.
    const double ulp = dtype == DType::BF16 ? 0x1.0p-8 : 0x1.0p-11;
    std::uint64_t seed = 101;
    for (const Case& c : kCases) {
      INFO(c.name);
      auto in = [&](const Shape& shape) { return randomNormal(shape, ++seed).castTo(dtype); };
      Tensor q = in(c.q), k = in(c.kv), v = in(c.kv), dOut = in(c.q);
      const cpu::AttentionOptions options{1 / std::sqrt(double(c.q.back())), c.causal};
      auto fused = cpu::fusedAttention(q, k, v, options);
      CHECK(fused.out.dtype() == dtype);
      CHECK(fused.lse.dtype() == DType::F32);
      Unfused exact = unfused(q.toF32(), k.toF32(), v.toF32(), dOut.toF32(), options.scale, c.causal);
      requireClose("out", fused.out, exact.out, ulp, ulp);
      auto grads = cpu::fusedAttentionGrad(q, k, v, dOut, fused.lse, options);
      CHECK(grads.dq.dtype() == dtype);
      requireClose("dq", grads.dq, exact.dq, 4 * ulp, 4 * ulp);
      requireClose("dk", grads.dk, exact.dk, 4 * ulp, 4 * ulp);
      requireClose("dv", grads.dv, exact.dv, ulp, ulp);
    }
  }
}

TEST_CASE("fused attention names what is wrong with its operands", "[kernels][attention]") {
  Tensor q = randomNormal({2, 6, 4}, 1), k = randomNormal({2, 4, 4}, 2);
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(message([&] { cpu::fusedAttention(q, k, k, {1.0, true}); }),
             Catch::Contains("causal attention needs the query rows (6) a multiple of the keys (4)"));
  CHECK_THAT(message([&] { cpu::fusedAttention(q, k, randomNormal({2, 4, 5}, 3), {}); }),
             Catch::Contains("k, v [..., s, d] of one rank"));
  CHECK_THAT(message([&] { cpu::fusedAttention(q, randomNormal({3, 4, 4}, 4), randomNormal({3, 4, 4}, 4), {}); }),
             Catch::Contains("share their leading dimensions"));
  CHECK_THAT(message([&] { cpu::fusedAttention(q, k.castTo(DType::BF16), k, {}); }),
             Catch::Contains("one float type"));
  auto fused = cpu::fusedAttention(q, k, k, {});
  CHECK_THAT(message([&] { cpu::fusedAttentionGrad(q, k, k, fused.out, fused.out, {}); }),
             Catch::Contains("lse f32 of q's shape without its last dimension"));
}
