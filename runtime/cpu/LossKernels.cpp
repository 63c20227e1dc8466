// Cross-entropy of logits against integer labels, the mean over all positions,
// through a numerically stable log-softmax.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "runtime/cpu/FastMath.h"
#include "runtime/cpu/KernelSupport.h"

namespace meshflow::runtime::cpu {
namespace {

struct Positions {
  std::int64_t count = 0;
  std::int64_t vocab = 0;
};

Positions positionsOf(const KernelArgs& args, const Tensor& logits, const Tensor& labels) {
  if (logits.rank() == 0 || labels.rank() + 1 != logits.rank() ||
      !std::equal(labels.shape().begin(), labels.shape().end(), logits.shape().begin()))
    args.fail(
        fmt::format("labels {} do not match logits {}", labels.typeText(), logits.typeText()));
  if (labels.elements() == 0) args.fail("no positions to average over");
  return {labels.elements(), logits.dim(-1)};
}

std::int64_t checkedLabel(const KernelArgs& args, std::int32_t label, std::int64_t vocab) {
  if (label < 0 || label >= vocab)
    args.fail(fmt::format("label {} is outside [0, {})", label, vocab));
  return label;
}

// exp(row − max) into `terms` (a loop the compiler vectorises), their sum in
// row order and the row's maximum: exp never overflows, the largest term is 1.
struct ShiftedSum {
  float max = 0;
  double sum = 0;

  double logSumExp() const { return max + std::log(sum); }
};

ShiftedSum shiftedExp(const float* row, std::int64_t n, float* terms) {
  ShiftedSum s{-std::numeric_limits<float>::infinity(), 0};
  for (std::int64_t j = 0; j < n; ++j) s.max = std::max(s.max, row[j]);
  for (std::int64_t j = 0; j < n; ++j) terms[j] = expNonPositive(row[j] - s.max);
  for (std::int64_t j = 0; j < n; ++j) s.sum += terms[j];
  return s;
}

}  // namespace

void crossEntropy(const KernelArgs& args) {
  args.expectArity(2, 1);
  const Tensor& logits = args.f32(0);
  const Tensor& labels = args.i32(1);
  Positions pos = positionsOf(args, logits, labels);
  double total = 0;
  std::vector<float> terms(static_cast<std::size_t>(pos.vocab));
  for (std::int64_t p = 0; p < pos.count; ++p) {
    const float* row = logits.f32().data() + p * pos.vocab;
    std::int64_t label = checkedLabel(args, labels.i32()[static_cast<std::size_t>(p)], pos.vocab);
    total += shiftedExp(row, pos.vocab, terms.data()).logSumExp() - row[label];
  }
  args.outF32(0, {}).f32()[0] = static_cast<float>(total / static_cast<double>(pos.count));
}

void crossEntropyGrad(const KernelArgs& args) {
  args.expectArity(3, 1);
  const Tensor& logits = args.f32(0);
  const Tensor& labels = args.i32(1);
  const Tensor& dloss = args.f32(2);
  if (dloss.elements() != 1) args.fail("dloss must be a scalar, got " + dloss.typeText());
  Positions pos = positionsOf(args, logits, labels);
  Tensor& dlogits = args.outF32(0, logits.shape());
  // d mean(loss) / d logits = (softmax - onehot) / positions, times the upstream dloss.
  double factor = static_cast<double>(dloss.f32()[0]) / static_cast<double>(pos.count);
  float* grads = dlogits.f32().data();
  for (std::int64_t p = 0; p < pos.count; ++p) {
    const float* row = logits.f32().data() + p * pos.vocab;
    float* out = grads + p * pos.vocab;
    std::int64_t label = checkedLabel(args, labels.i32()[static_cast<std::size_t>(p)], pos.vocab);
    ShiftedSum s = shiftedExp(row, pos.vocab, out);
    // softmax · factor, then the one-hot term at the label.
    double atLabel = out[label];
    auto scale = static_cast<float>(factor / s.sum);
    for (std::int64_t j = 0; j < pos.vocab; ++j) out[j] *= scale;
    out[label] = static_cast<float>((atLabel / s.sum - 1.0) * factor);
  }
}

}  // namespace meshflow::runtime::cpu
