#include "passes/FusedKernels.h"

#include <algorithm>
#include <initializer_list>

namespace meshflow::passes {
namespace {

using K = ir::OpKind;

struct Finder {
  const ir::Graph& g;
  std::vector<std::vector<ir::OpId>> consumers = g.consumers();
  FusedKernels out;

  explicit Finder(const ir::Graph& graph) : g(graph) {
    out.kindOfOp.assign(g.ops().size(), FusedKind::kNone);
    out.causalProduct.assign(g.ops().size(), false);
    out.internal.assign(g.valueCount(), false);
    out.keptForBackward.assign(g.valueCount(), false);
  }

  const ir::Op& producerOf(ir::ValueId v) const { return g.op(g.value(v).producer); }
  ir::OpId idOf(const ir::Op& op) const { return g.value(op.outputs[0]).producer; }

  // The one op that reads op's only output, or null.
  const ir::Op* soleConsumer(const ir::Op& op) const {
    if (op.outputs.size() != 1 || consumers[op.outputs[0]].size() != 1) return nullptr;
    return &g.op(consumers[op.outputs[0]][0]);
  }
  bool onlyReadBy(const ir::Op& op, const ir::Op& reader) const {
    return soleConsumer(op) == &reader;
  }
  static bool is(const ir::Op* op, std::initializer_list<K> kinds) {
    return op && std::find(kinds.begin(), kinds.end(), op->kind) != kinds.end();
  }
  bool claimed(const ir::Op& op) const { return out.kindOfOp[idOf(op)] != FusedKind::kNone; }

  // Marks `ops` as one kernel; every output but the last op's is internal.
  void fuse(const std::vector<const ir::Op*>& ops, FusedKind kind) {
    for (const ir::Op* op : ops) {
      out.kindOfOp[idOf(*op)] = kind;
      if (op != ops.back())
        for (ir::ValueId v : op->outputs) out.internal[v] = true;
    }
  }

  static bool squareScores(const ir::Graph& g, const ir::Op& op) {
    const auto& shape = g.value(op.outputs[0]).type.shape;
    return shape.size() == 4 && shape[2] == shape[3];
  }

  // matmul(q, kᵀ) → [reshape | scale | causal_mask | dropout]* → softmax →
  // [reshape | dropout]* → matmul(·, v), each value read once, inside.
  void attention(const ir::Op& softmax) {
    if (!squareScores(g, softmax)) return;
    std::vector<const ir::Op*> before;
    const ir::Op* op = &producerOf(softmax.inputs[0]);
    while (is(op, {K::Reshape, K::Scale, K::CausalMask, K::Dropout})) {
      before.push_back(op);
      op = &producerOf(op->inputs[0]);
    }
    if (!is(op, {K::MatMul})) return;
    const ir::Op* scores = op;
    std::vector<const ir::Op*> ops{scores};
    ops.insert(ops.end(), before.rbegin(), before.rend());
    ops.push_back(&softmax);
    const ir::Op* next = soleConsumer(softmax);
    while (is(next, {K::Reshape, K::Dropout})) {
      ops.push_back(next);
      next = soleConsumer(*next);
    }
    if (!is(next, {K::MatMul}) || g.value(next->inputs[0]).producer != idOf(*ops.back())) return;
    ops.push_back(next);
    for (std::size_t i = 0; i + 1 < ops.size(); ++i)
      if (!onlyReadBy(*ops[i], *ops[i + 1]) || claimed(*ops[i])) return;
    fuse(ops, FusedKind::kAttention);
    bool causal = std::any_of(ops.begin(), ops.end(),
                              [](const ir::Op* o) { return o->kind == K::CausalMask; });
    out.causalProduct[idOf(*scores)] = causal;
    out.causalProduct[idOf(*next)] = causal;
  }

  // mul(x, x) → mean → [reshape]* → rsqrt → mul(x, ·) → mul(·, gain).
  void rmsNorm(const ir::Op& rsqrt) {
    std::vector<const ir::Op*> shape;
    const ir::Op* op = &producerOf(rsqrt.inputs[0]);
    while (is(op, {K::Reshape})) {
      shape.push_back(op);
      op = &producerOf(op->inputs[0]);
    }
    if (!is(op, {K::Mean})) return;
    const ir::Op* mean = op;
    const ir::Op* square = &producerOf(mean->inputs[0]);
    if (!is(square, {K::Mul}) || square->inputs[0] != square->inputs[1]) return;
    const ir::ValueId x = square->inputs[0];
    const ir::Op* normed = soleConsumer(rsqrt);
    if (!is(normed, {K::Mul}) ||
        (normed->inputs[0] != x && normed->inputs[1] != x))
      return;
    const ir::Op* gained = soleConsumer(*normed);
    if (!is(gained, {K::Mul})) return;
    std::vector<const ir::Op*> ops{square, mean};
    ops.insert(ops.end(), shape.rbegin(), shape.rend());
    ops.insert(ops.end(), {&rsqrt, normed, gained});
    for (std::size_t i = 0; i + 1 < ops.size(); ++i)
      if (!onlyReadBy(*ops[i], *ops[i + 1]) || claimed(*ops[i])) return;
    fuse(ops, FusedKind::kRmsNorm);
    out.keptForBackward[rsqrt.outputs[0]] = true;
  }

  // sigmoid(gate) → mul(gate, ·) → mul(·, up).
  void swiglu(const ir::Op& sigmoid) {
    const ir::ValueId gate = sigmoid.inputs[0];
    const ir::Op* silu = soleConsumer(sigmoid);
    if (!is(silu, {K::Mul}) || (silu->inputs[0] != gate && silu->inputs[1] != gate)) return;
    const ir::Op* gated = soleConsumer(*silu);
    if (!is(gated, {K::Mul}) || claimed(sigmoid) || claimed(*silu)) return;
    fuse({&sigmoid, silu, gated}, FusedKind::kSwiGlu);
  }
};

}  // namespace

FusedProductWork fusedProductWork(bool causal) {
  const double computed = causal ? 0.5 : 1.0;  // the share of the blocks computed
  return {computed, computed * 5.0 / 4.0};
}

FusedKernels findFusedKernels(const ir::Graph& graph) {
  Finder f(graph);
  for (const ir::Op& op : graph.ops()) {
    if (op.kind == K::Softmax) f.attention(op);
    if (op.kind == K::Rsqrt) f.rmsNorm(op);
    if (op.kind == K::Sigmoid) f.swiglu(op);
  }
  return std::move(f.out);
}

void keepWhatFusedKernelsRead(const FusedKernels& fused, std::vector<bool>& readByBackward) {
  for (ir::ValueId v = 0; v < readByBackward.size(); ++v)
    if (fused.isInternal(v) && !fused.keptForBackward[v]) readByBackward[v] = false;
}

}  // namespace meshflow::passes
