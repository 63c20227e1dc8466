#include "runtime/FusedOps.h"

#include <algorithm>
#include <optional>
#include <variant>

namespace meshflow::runtime {
namespace {

using K = ir::OpKind;

struct Chain {
  const ir::Graph& graph;
  std::span<const ir::OpId> ops;
  const ValueReaders& readers;

  const ir::Op& at(std::size_t p) const { return graph.op(ops[p]); }
  bool is(std::size_t p, K kind) const { return p < ops.size() && at(p).kind == kind; }
  // Op p's only output is op p+1's first input and nothing else reads it.
  bool feedsNext(std::size_t p) const {
    if (p + 1 >= ops.size() || at(p).outputs.size() != 1 || at(p + 1).inputs.empty()) return false;
    const ir::ValueId v = at(p).outputs[0];
    return at(p + 1).inputs[0] == v && readers.onlyReader(v, ops[p + 1]);
  }
};

FusedGroup group(FusedPattern pattern, std::size_t first, std::size_t last, const Chain& c) {
  FusedGroup g;
  g.pattern = pattern;
  g.first = first;
  g.count = last - first + 1;
  g.outputs = {c.at(last).outputs.at(0)};
  g.live = {true};
  for (std::size_t p = first; p <= last; ++p) {
    if (c.at(p).kind == K::Scale) g.scale = scaleFactor(c.at(p));
    if (c.at(p).kind == K::CausalMask || c.at(p).kind == K::CausalMaskGrad) g.causal = true;
  }
  return g;
}

// [Scale] → [CausalMask] → Softmax from p.
std::optional<FusedGroup> softmaxAt(const Chain& c, std::size_t p) {
  std::size_t q = p;
  if (c.is(q, K::Scale) && c.feedsNext(q) &&
      (c.is(q + 1, K::CausalMask) || c.is(q + 1, K::Softmax)))
    ++q;
  if (c.is(q, K::CausalMask) && c.feedsNext(q) && c.is(q + 1, K::Softmax)) ++q;
  if (q == p || !c.is(q, K::Softmax)) return std::nullopt;
  FusedGroup g = group(FusedPattern::kSoftmax, p, q, c);
  g.inputs = {c.at(p).inputs.at(0)};
  return g;
}

// SoftmaxGrad → [CausalMaskGrad] → [Scale] from p.
std::optional<FusedGroup> softmaxGradAt(const Chain& c, std::size_t p) {
  if (!c.is(p, K::SoftmaxGrad) || c.at(p).inputs.size() != 2) return std::nullopt;
  std::size_t q = p;
  if (c.feedsNext(q) && c.is(q + 1, K::CausalMaskGrad)) ++q;
  if (c.feedsNext(q) && c.is(q + 1, K::Scale)) ++q;
  if (q == p) return std::nullopt;
  FusedGroup g = group(FusedPattern::kSoftmaxGrad, p, q, c);
  g.inputs = c.at(p).inputs;
  return g;
}

// Whether `bias` is a vector along the last dimension of `x` (of rank 2 or more).
bool biasOf(const ir::Graph& graph, ir::ValueId x, ir::ValueId bias) {
  const auto& xs = graph.value(x).type.shape;
  const auto& bs = graph.value(bias).type.shape;
  return xs.size() >= 2 && bs.size() == 1 && !bs[0].perBatch && !xs.back().perBatch &&
         xs.back() == bs[0] && graph.value(x).type.dtype == graph.value(bias).type.dtype;
}

// Add(x, bias) → Gelu from p.
std::optional<FusedGroup> biasGeluAt(const Chain& c, std::size_t p) {
  if (!c.is(p, K::Add) || !c.is(p + 1, K::Gelu) || c.at(p).inputs.size() != 2 ||
      c.at(p).outputs.size() != 1)
    return std::nullopt;
  const ir::ValueId z = c.at(p).outputs[0];
  if (c.at(p + 1).inputs.empty() || c.at(p + 1).inputs[0] != z) return std::nullopt;
  ir::ValueId x = c.at(p).inputs[0], bias = c.at(p).inputs[1];
  if (!biasOf(c.graph, x, bias)) std::swap(x, bias);
  if (!biasOf(c.graph, x, bias)) return std::nullopt;
  FusedGroup g;
  g.pattern = FusedPattern::kBiasGelu;
  g.first = p;
  g.count = 2;
  g.inputs = {x, bias};
  g.outputs = {z, c.at(p + 1).outputs.at(0)};
  g.live = {c.readers.readBeyond(z, c.ops[p + 1]), true};
  return g;
}

// Input index of `v` in g.inputs, appended when new.
int inputIndex(FusedGroup& g, ir::ValueId v) {
  auto it = std::find(g.inputs.begin(), g.inputs.end(), v);
  if (it != g.inputs.end()) return static_cast<int>(it - g.inputs.begin());
  g.inputs.push_back(v);
  return static_cast<int>(g.inputs.size() - 1);
}

// The step op p adds to a chain whose value so far is `chain` (none for the first op).
std::optional<ChainStep> stepOf(const Chain& c, std::size_t p, std::optional<ir::ValueId> chain,
                                FusedGroup& g) {
  const ir::Op& op = c.at(p);
  if (!chainable(op.kind) || op.outputs.size() != 1) return std::nullopt;
  ChainStep step;
  step.kind = op.kind;
  if (op.kind == K::Scale) step.factor = scaleFactor(op);
  if (!binaryOp(op.kind)) {
    if (op.inputs.size() != 1) return std::nullopt;
    if (!chain) inputIndex(g, op.inputs[0]);
    return step;
  }
  if (op.inputs.size() != 2) return std::nullopt;
  if (!chain) {
    inputIndex(g, op.inputs[0]);
    step.other = inputIndex(g, op.inputs[1]);
    return step;
  }
  if ((op.inputs[0] == *chain) == (op.inputs[1] == *chain))
    return std::nullopt;  // x ∘ x reads it twice
  step.chainOnRight = op.inputs[1] == *chain;
  step.other = inputIndex(g, op.inputs[step.chainOnRight ? 0 : 1]);
  return step;
}

// Consecutive element-wise ops from p, each result of the first's type and
// read only by the next op, which reads it as one operand.
std::optional<FusedGroup> elementwiseAt(const Chain& c, std::size_t p) {
  FusedGroup g;
  g.pattern = FusedPattern::kElementwise;
  g.first = p;
  std::optional<ChainStep> first = stepOf(c, p, std::nullopt, g);
  if (!first) return std::nullopt;
  g.steps.push_back(*first);
  const ir::TensorType& type = c.graph.value(c.at(p).outputs[0]).type;
  std::size_t q = p;
  while (q + 1 < c.ops.size() && g.steps.size() < kMaxChainSteps) {
    const ir::ValueId v = c.at(q).outputs[0];
    if (!c.readers.onlyReader(v, c.ops[q + 1]) || c.at(q + 1).outputs.size() != 1 ||
        c.graph.value(c.at(q + 1).outputs[0]).type != type)
      break;
    FusedGroup extended = g;
    std::optional<ChainStep> step = stepOf(c, q + 1, v, extended);
    if (!step || extended.inputs.size() > kMaxChainInputs) break;
    g = std::move(extended);
    g.steps.push_back(*step);
    ++q;
  }
  if (q == p) return std::nullopt;
  g.count = q - p + 1;
  g.outputs = {c.at(q).outputs[0]};
  g.live = {true};
  return g;
}

}  // namespace

bool binaryOp(ir::OpKind kind) {
  return kind == K::Add || kind == K::Sub || kind == K::Mul || kind == K::Div;
}

bool chainable(ir::OpKind kind) {
  switch (kind) {
    case K::Add:
    case K::Sub:
    case K::Mul:
    case K::Div:
    case K::Neg:
    case K::Relu:
    case K::Gelu:
    case K::Tanh:
    case K::Sigmoid:
    case K::Exp:
    case K::Scale:
      return true;
    default:
      return false;
  }
}

const char* fusedPatternName(FusedPattern pattern) {
  switch (pattern) {
    case FusedPattern::kSoftmax:
      return "fused_softmax";
    case FusedPattern::kSoftmaxGrad:
      return "fused_softmax_grad";
    case FusedPattern::kBiasGelu:
      return "fused_bias_gelu";
    case FusedPattern::kElementwise:
      return "fused_elementwise";
  }
  return "fused";
}

double scaleFactor(const ir::Op& op) {
  auto it = op.attrs.find("factor");
  if (it == op.attrs.end()) return 1.0;
  if (const auto* d = std::get_if<double>(&it->second)) return *d;
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  return 1.0;
}

ValueReaders::ValueReaders(const ir::Graph& graph)
    : consumers_(graph.consumers()), graphOutput_(graph.valueCount(), false) {
  for (ir::ValueId v : graph.outputs)
    if (v < graphOutput_.size()) graphOutput_[v] = true;
}

bool ValueReaders::onlyReader(ir::ValueId v, ir::OpId reader) const {
  if (v >= consumers_.size() || graphOutput_[v]) return false;
  const auto& readers = consumers_[v];
  return !readers.empty() &&
         std::all_of(readers.begin(), readers.end(), [&](ir::OpId r) { return r == reader; });
}

bool ValueReaders::readOnlyBy(ir::ValueId v, std::span<const ir::OpId> allowed) const {
  if (v >= consumers_.size() || graphOutput_[v]) return false;
  return std::all_of(consumers_[v].begin(), consumers_[v].end(),
                     [&](ir::OpId r) { return std::find(allowed.begin(), allowed.end(), r) != allowed.end(); });
}

std::vector<FusedGroup> findFusedGroups(const ir::Graph& graph, std::span<const ir::OpId> ops,
                                        const ValueReaders& readers) {
  const Chain chain{graph, ops, readers};
  std::vector<FusedGroup> groups;
  for (std::size_t p = 0; p < ops.size();) {
    std::optional<FusedGroup> g = softmaxAt(chain, p);
    if (!g) g = softmaxGradAt(chain, p);
    if (!g) g = biasGeluAt(chain, p);
    if (!g) g = elementwiseAt(chain, p);
    if (!g) {
      ++p;
      continue;
    }
    p += g->count;
    groups.push_back(std::move(*g));
  }
  return groups;
}

}  // namespace meshflow::runtime
