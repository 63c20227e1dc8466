// Type rules of the neural-network ops: matmul, softmax, layer norm, embedding,
// cross entropy, top-k gating, and their gradients.
#include <fmt/format.h>

#include <algorithm>

#include "ir/OpRulesImpl.h"

namespace meshflow::ir::rules {
namespace {

std::vector<Dim> withoutLast(const std::vector<Dim>& shape) {
  return {shape.begin(), shape.end() - 1};
}

void expectSameDType(const Rule& r, std::size_t i, std::size_t j) {
  if (r.in(i).dtype != r.in(j).dtype)
    r.fail(fmt::format("dtypes differ: {} and {}", r.in(i).text(), r.in(j).text()));
}

/// gamma (input `i`) is [n] with the dtype of x (input 0) whose last dim is n.
void expectNormWeight(const Rule& r, std::size_t i, const char* role) {
  const TensorType& x = r.in(0);
  const TensorType& w = r.in(i);
  if (w.dtype != x.dtype || w.shape != std::vector<Dim>{x.shape.back()})
    r.fail(fmt::format("{} {} does not match the last dimension of {}", role, w.text(), x.text()));
}

/// `ids` (input `i`) has the shape of input `j` without its last dimension.
void expectLeadingIds(const Rule& r, std::size_t i, std::size_t j, const char* role) {
  const TensorType& x = r.in(j);
  if (x.rank() == 0 || r.in(i).shape != withoutLast(x.shape))
    r.fail(fmt::format("{} {} do not match the leading dimensions of {}", role, r.in(i).text(),
                       x.text()));
}

double positiveEps(const Rule& r) {
  double eps = r.numberAttr("eps");
  if (eps <= 0) r.fail(fmt::format("attribute 'eps' must be > 0, got {}", eps));
  return eps;
}

/// The k of a top-k gate over the last dimension of input 0.
void checkTopK(const Rule& r) {
  const Dim& experts = r.in(0).shape.back();
  if (experts.perBatch) r.fail("cannot gate over a batch dimension: " + r.in(0).text());
  r.intAttrIn("k", 1, experts.value);
}

}  // namespace

Types matmulRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({"transpose_a", "transpose_b"});
  bool transposeA = r.flagAttr("transpose_a");
  bool transposeB = r.flagAttr("transpose_b");
  const TensorType& a = r.in(0);
  const TensorType& b = r.in(1);
  r.expectFloat(0);
  r.expectFloat(1);
  expectSameDType(r, 0, 1);
  std::string operands = fmt::format("{} x {}{}{}", a.text(), b.text(), transposeA ? " (transpose_a)" : "",
                                     transposeB ? " (transpose_b)" : "");
  if (a.rank() < 2 || b.rank() < 2) r.fail("expects operands of rank >= 2, got " + operands);
  std::size_t rb = b.rank();
  if (rb > 2 &&
      (rb != a.rank() || !std::equal(b.shape.begin(), b.shape.end() - 2, a.shape.begin())))
    r.fail("batch dimensions differ: " + operands);
  const Dim& k = transposeB ? b.shape[rb - 1] : b.shape[rb - 2];
  const Dim& n = transposeB ? b.shape[rb - 2] : b.shape[rb - 1];
  std::size_t ra = a.rank();
  const Dim& m = transposeA ? a.shape[ra - 1] : a.shape[ra - 2];
  if ((transposeA ? a.shape[ra - 2] : a.shape[ra - 1]) != k) r.fail("inner dimensions differ: " + operands);
  TensorType y{a.dtype, std::vector<Dim>(a.shape.begin(), a.shape.end() - 2)};
  y.shape.push_back(m);
  y.shape.push_back(n);
  return {y};
}

Types softmaxRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({});
  r.expectFloat(0);
  r.expectRankAtLeast(0, 1);
  return {r.in(0)};
}

Types softmaxGradRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({});
  r.expectFloat(0);
  r.expectRankAtLeast(0, 1);
  r.expectSameType(0, 1);
  return {r.in(1)};
}

Types layerNormRule(const Rule& r) {
  r.expectInputs(3);
  r.allowAttrs({"eps"});
  positiveEps(r);
  r.expectFloat(0);
  r.expectRankAtLeast(0, 1);
  expectNormWeight(r, 1, "gamma");
  expectNormWeight(r, 2, "beta");
  return {r.in(0)};
}

Types layerNormGradRule(const Rule& r) {
  r.expectInputs(3);
  r.allowAttrs({"eps"});
  positiveEps(r);
  r.expectFloat(0);
  r.expectRankAtLeast(0, 1);
  expectNormWeight(r, 1, "gamma");
  r.expectSameType(0, 2);
  return {r.in(0), r.in(1), r.in(1)};
}

Types embeddingRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({});
  const TensorType& table = r.in(0);
  if (!isFloat(table.dtype) || table.rank() != 2)
    r.fail("table must be a floating-point matrix [V, h], got " + table.text());
  r.expectI32(1, "ids");
  TensorType y{table.dtype, r.in(1).shape};
  y.shape.push_back(table.shape[1]);
  return {y};
}

Types embeddingGradRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({"vocab"});
  std::int64_t vocab = r.intAttr("vocab");
  if (vocab < 1) r.fail(fmt::format("attribute 'vocab' must be >= 1, got {}", vocab));
  r.expectI32(0, "ids");
  r.expectFloat(1);
  expectLeadingIds(r, 0, 1, "ids");
  return {TensorType{r.in(1).dtype, {Dim::constant(vocab), r.in(1).shape.back()}}};
}

Types crossEntropyRule(const Rule& r) {
  r.expectInputs(2);
  r.allowAttrs({});
  r.expectFloat(0);
  r.expectRankAtLeast(0, 1);
  r.expectI32(1, "labels");
  expectLeadingIds(r, 1, 0, "labels");
  return {TensorType{DType::F32, {}}};
}

Types crossEntropyGradRule(const Rule& r) {
  r.expectInputs(3);
  r.allowAttrs({});
  r.expectFloat(0);
  r.expectRankAtLeast(0, 1);
  r.expectI32(1, "labels");
  expectLeadingIds(r, 1, 0, "labels");
  r.expectFloat(2);
  r.expectScalar(2, "dloss");
  return {r.in(0)};
}

Types topKGateRule(const Rule& r) {
  r.expectInputs(1);
  r.allowAttrs({"k"});
  r.expectFloat(0);
  r.expectRankAtLeast(0, 1);
  checkTopK(r);
  return {r.in(0)};
}

Types topKGateGradRule(const Rule& r) {
  r.expectInputs(3);
  r.allowAttrs({"k"});
  r.expectFloat(0);
  r.expectRankAtLeast(0, 1);
  r.expectSameType(0, 1);
  r.expectSameType(0, 2);
  checkTopK(r);
  return {r.in(0)};
}

}  // namespace meshflow::ir::rules
