// Fused attention on the host, a query row at a time (FusedAttention.h).
#include "runtime/cpu/FusedAttention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace meshflow::runtime::cpu {
namespace {

// The sizes of one call: n batches (q's leading dimensions) of r query rows,
// s keys, d features.
struct Dims {
  std::int64_t n = 1, r = 0, s = 0, d = 0;
};

[[noreturn]] void badShapes(const std::string& why, const Tensor& q, const Tensor& k, const Tensor& v) {
  throw std::invalid_argument(fmt::format("fused attention: {} (q {}, k {}, v {})", why, q.typeText(),
                                          k.typeText(), v.typeText()));
}

bool floatType(ir::DType dtype) { return dtype != ir::DType::I32; }

Dims checkedDims(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  if (!floatType(q.dtype()) || k.dtype() != q.dtype() || v.dtype() != q.dtype())
    badShapes("q, k and v must be of one float type", q, k, v);
  if (q.rank() < 2 || k.shape() != v.shape() || k.rank() != q.rank())
    badShapes("needs q [..., r, d] and k, v [..., s, d] of one rank", q, k, v);
  for (std::size_t a = 0; a + 2 < q.rank(); ++a)
    if (q.shape()[a] != k.shape()[a]) badShapes("q, k and v must share their leading dimensions", q, k, v);
  if (q.dim(-1) != k.dim(-1)) badShapes("q and k must have one feature size d", q, k, v);
  Dims dims{1, q.dim(-2), k.dim(-2), q.dim(-1)};
  for (std::size_t a = 0; a + 2 < q.rank(); ++a) dims.n *= q.shape()[a];
  if (dims.r > 0 && dims.s == 0) badShapes("no keys to attend to", q, k, v);
  if (options.causal && dims.s > 0 && dims.r % dims.s != 0)
    badShapes(fmt::format("causal attention needs the query rows ({}) a multiple of the keys ({})", dims.r, dims.s),
              q, k, v);
  return dims;
}

// The keys query row i sees.
std::int64_t visibleKeys(const Dims& dims, std::int64_t i, bool causal) { return causal ? i % dims.s + 1 : dims.s; }

float dot(const float* a, const float* b, std::int64_t d) {
  float sum = 0;
  for (std::int64_t t = 0; t < d; ++t) sum += a[t] * b[t];
  return sum;
}

// Row i's scaled scores against its visible keys, into `scores`.
void rowScores(const float* qi, const float* k, std::int64_t keys, std::int64_t d, float scale,
               std::vector<float>& scores) {
  scores.resize(static_cast<std::size_t>(keys));
  for (std::int64_t j = 0; j < keys; ++j) scores[j] = dot(qi, k + j * d, d) * scale;
}

// An f32 tensor of `shape` rounded to `dtype` (the result's type).
Tensor rounded(Tensor f32, ir::DType dtype) { return dtype == ir::DType::F32 ? f32 : f32.castTo(dtype); }

}  // namespace

AttentionResult fusedAttention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& options) {
  const Dims dims = checkedDims(q, k, v, options);
  const Tensor q32 = q.toF32(), k32 = k.toF32(), v32 = v.toF32();
  Shape lseShape(q.shape().begin(), q.shape().end() - 1);
  Tensor out = Tensor::uninitialized(ir::DType::F32, q.shape());
  Tensor lse = Tensor::uninitialized(ir::DType::F32, lseShape);
  const float scale = static_cast<float>(options.scale);
  const float *qp = q32.f32().data(), *kp = k32.f32().data(), *vp = v32.f32().data();
  float *op = out.f32().data(), *lp = lse.f32().data();
  std::vector<float> scores;
  for (std::int64_t b = 0; b < dims.n; ++b)
    for (std::int64_t i = 0; i < dims.r; ++i) {
      const std::int64_t row = b * dims.r + i, keys = visibleKeys(dims, i, options.causal);
      const float* kb = kp + b * dims.s * dims.d;
      const float* vb = vp + b * dims.s * dims.d;
      rowScores(qp + row * dims.d, kb, keys, dims.d, scale, scores);
      const float top = *std::max_element(scores.begin(), scores.end());
      float total = 0;
      for (float& x : scores) total += (x = std::exp(x - top));
      float* oi = op + row * dims.d;
      std::fill(oi, oi + dims.d, 0.0f);
      for (std::int64_t j = 0; j < keys; ++j) {
        const float p = scores[j] / total;
        for (std::int64_t t = 0; t < dims.d; ++t) oi[t] += p * vb[j * dims.d + t];
      }
      lp[row] = top + std::log(total);
    }
  return {rounded(std::move(out), q.dtype()), std::move(lse)};
}

AttentionGrads fusedAttentionGrad(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dOut,
                                  const Tensor& lse, const AttentionOptions& options) {
  const Dims dims = checkedDims(q, k, v, options);
  Shape lseShape(q.shape().begin(), q.shape().end() - 1);
  if (dOut.shape() != q.shape() || dOut.dtype() != q.dtype() || lse.dtype() != ir::DType::F32 ||
      lse.shape() != lseShape)
    throw std::invalid_argument(fmt::format(
        "fused attention backward: needs dOut of q's type {} and lse f32 of q's shape without its last "
        "dimension, got dOut {}, lse {}",
        q.typeText(), dOut.typeText(), lse.typeText()));
  const Tensor q32 = q.toF32(), k32 = k.toF32(), v32 = v.toF32(), do32 = dOut.toF32();
  Tensor dq = Tensor::uninitialized(ir::DType::F32, q.shape());
  Tensor dk = Tensor::zeros(k.shape()), dv = Tensor::zeros(v.shape());
  const float scale = static_cast<float>(options.scale);
  const float *qp = q32.f32().data(), *kp = k32.f32().data(), *vp = v32.f32().data();
  const float *dop = do32.f32().data(), *lp = lse.f32().data();
  float *dqp = dq.f32().data(), *dkp = dk.f32().data(), *dvp = dv.f32().data();
  std::vector<float> p, dp;
  for (std::int64_t b = 0; b < dims.n; ++b)
    for (std::int64_t i = 0; i < dims.r; ++i) {
      const std::int64_t row = b * dims.r + i, keys = visibleKeys(dims, i, options.causal);
      const std::int64_t base = b * dims.s * dims.d;
      const float *qi = qp + row * dims.d, *doi = dop + row * dims.d;
      rowScores(qi, kp + base, keys, dims.d, scale, p);
      dp.resize(static_cast<std::size_t>(keys));
      // Softmax's backward: dScores_j = p_j (dp_j - Σ_t p_t dp_t), dp_j = dOut_i · v_j.
      float rowDot = 0;
      for (std::int64_t j = 0; j < keys; ++j) {
        p[j] = std::exp(p[j] - lp[row]);
        dp[j] = dot(doi, vp + base + j * dims.d, dims.d);
        rowDot += p[j] * dp[j];
      }
      float* dqi = dqp + row * dims.d;
      std::fill(dqi, dqi + dims.d, 0.0f);
      for (std::int64_t j = 0; j < keys; ++j) {
        const float ds = p[j] * (dp[j] - rowDot) * scale;
        const float* kj = kp + base + j * dims.d;
        float *dkj = dkp + base + j * dims.d, *dvj = dvp + base + j * dims.d;
        for (std::int64_t t = 0; t < dims.d; ++t) {
          dqi[t] += ds * kj[t];
          dkj[t] += ds * qi[t];
          dvj[t] += p[j] * doi[t];
        }
      }
    }
  const ir::DType dtype = q.dtype();
  return {rounded(std::move(dq), dtype), rounded(std::move(dk), dtype), rounded(std::move(dv), dtype)};
}

}  // namespace meshflow::runtime::cpu
