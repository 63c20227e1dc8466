#include "runtime/AttentionGroups.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace meshflow::runtime {
namespace {

using K = ir::OpKind;

class Finder {
 public:
  Finder(const ir::Graph& graph, const ValueReaders& readers)
      : graph_(graph), readers_(readers), consumers_(graph.consumers()) {}

  std::optional<AttentionGroup> at(ir::OpId softmax) const {
    AttentionGroup g;
    Forward f;
    if (!forwardOf(softmax, g, f) || !consecutive(g.forward)) return std::nullopt;
    if (!backwardOf(g, f) || !consecutive(g.backward)) return std::nullopt;
    if (!readsAreInside(g, f) || !operandsFit(g, f)) return std::nullopt;
    return g;
  }

 private:
  // The forward's ops by role (none: the optional op is absent).
  struct Forward {
    std::optional<ir::OpId> scoresMatMul, scoresReshape, scale, mask, softmax, probsReshape, outMatMul;
    ir::ValueId softmaxOut = 0;
  };

  const ir::Op& op(ir::OpId id) const { return graph_.op(id); }
  ir::OpId producer(ir::ValueId v) const { return graph_.value(v).producer; }
  bool transposes(const ir::Op& o, bool a, bool b) const {
    return ir::flagAttr(o, "transpose_a") == a && ir::flagAttr(o, "transpose_b") == b;
  }
  // The one forward op that reads `v`, if exactly one does.
  std::optional<ir::OpId> forwardReader(ir::ValueId v) const {
    std::optional<ir::OpId> found;
    for (ir::OpId r : consumers_.at(v)) {
      if (op(r).phase != ir::Phase::Forward) continue;
      if (found && *found != r) return std::nullopt;
      found = r;
    }
    return found;
  }

  // Walks from the softmax back to MatMul(q, kᵀ) and on to MatMul(·, v).
  bool forwardOf(ir::OpId softmax, AttentionGroup& g, Forward& f) const {
    f.softmax = softmax;
    f.softmaxOut = op(softmax).outputs.at(0);
    ir::OpId p = producer(op(softmax).inputs.at(0));
    if (op(p).kind == K::CausalMask) f.mask = p, g.causal = true, p = producer(op(p).inputs.at(0));
    if (op(p).kind == K::Scale) f.scale = p, g.scale = scaleFactor(op(p)), p = producer(op(p).inputs.at(0));
    if (op(p).kind == K::Reshape) f.scoresReshape = p, p = producer(op(p).inputs.at(0));
    if (op(p).kind != K::MatMul || op(p).phase != ir::Phase::Forward || !transposes(op(p), false, true))
      return false;
    f.scoresMatMul = p;
    g.q = op(p).inputs.at(0);
    g.k = op(p).inputs.at(1);
    std::optional<ir::OpId> next = forwardReader(f.softmaxOut);
    g.probs = g.softmaxOut = f.softmaxOut;
    if (next && op(*next).kind == K::Reshape) {
      f.probsReshape = next;
      g.probs = op(*next).outputs.at(0);
      next = forwardReader(g.probs);
    }
    if (!next || op(*next).kind != K::MatMul || !transposes(op(*next), false, false) ||
        op(*next).inputs.at(0) != g.probs)
      return false;
    f.outMatMul = next;
    g.v = op(*next).inputs.at(1);
    g.out = op(*next).outputs.at(0);
    for (auto id : {f.scoresMatMul, f.scoresReshape, f.scale, f.mask, f.softmax, f.probsReshape, f.outMatMul})
      if (id) g.forward.push_back(*id);
    std::sort(g.forward.begin(), g.forward.end());
    return true;
  }

  // The backward autodiff emits for the forward ops, in its order, checked op
  // by op: anything else and the attention runs unfused.
  bool backwardOf(AttentionGroup& g, const Forward& f) const {
    for (ir::OpId id = 0; id < graph_.ops().size(); ++id)
      if (op(id).phase == ir::Phase::Backward && op(id).forwardOp &&
          std::binary_search(g.forward.begin(), g.forward.end(), *op(id).forwardOp))
        g.backward.push_back(id);
    std::size_t at = 0;
    auto next = [&](std::optional<ir::OpId> of, K kind) -> const ir::Op* {
      if (!of || at >= g.backward.size()) return nullptr;
      const ir::Op& o = op(g.backward[at]);
      if (o.kind != kind || o.forwardOp != of) return nullptr;
      ++at;
      return &o;
    };
    const ir::Op* dProbs = next(f.outMatMul, K::MatMul);
    const ir::Op* dv = next(f.outMatMul, K::MatMul);
    if (!dProbs || !dv || !transposes(*dProbs, false, true) || dProbs->inputs.at(1) != g.v ||
        !transposes(*dv, true, false) || dv->inputs.at(0) != g.probs || dv->inputs.at(1) != dProbs->inputs.at(0))
      return false;
    g.dOut = dProbs->inputs.at(0);
    g.dv = dv->outputs.at(0);
    ir::ValueId grad = dProbs->outputs.at(0);
    // Each optional step reads the gradient so far as its only operand (a
    // Scale with the forward's factor).
    auto step = [&](std::optional<ir::OpId> of, K kind) {
      if (!of) return true;
      const ir::Op* o = next(of, kind);
      if (!o || o->inputs.size() != 1 || o->inputs[0] != grad) return false;
      if (kind == K::Scale && scaleFactor(*o) != g.scale) return false;
      grad = o->outputs.at(0);
      return true;
    };
    if (!step(f.probsReshape, K::Reshape)) return false;
    const ir::Op* softmaxGrad = next(f.softmax, K::SoftmaxGrad);
    if (!softmaxGrad || softmaxGrad->inputs.at(0) != f.softmaxOut || softmaxGrad->inputs.at(1) != grad) return false;
    grad = softmaxGrad->outputs.at(0);
    if (!step(f.mask, K::CausalMaskGrad) || !step(f.scale, K::Scale) || !step(f.scoresReshape, K::Reshape))
      return false;
    const ir::Op* dq = next(f.scoresMatMul, K::MatMul);
    const ir::Op* dk = next(f.scoresMatMul, K::MatMul);
    if (!dq || !dk || !transposes(*dq, false, false) || dq->inputs.at(0) != grad || dq->inputs.at(1) != g.k ||
        !transposes(*dk, true, false) || dk->inputs.at(0) != grad || dk->inputs.at(1) != g.q)
      return false;
    g.dq = dq->outputs.at(0);
    g.dk = dk->outputs.at(0);
    return at == g.backward.size();
  }

  // Every value made inside the group is read inside it only (the
  // probabilities by both runs), and none leaves the graph.
  bool readsAreInside(const AttentionGroup& g, const Forward& f) const {
    std::vector<ir::OpId> both = g.forward;
    both.insert(both.end(), g.backward.begin(), g.backward.end());
    for (ir::OpId id : g.forward)
      for (ir::ValueId v : op(id).outputs)
        if (v != g.out && !readers_.readOnlyBy(v, v == f.softmaxOut || v == g.probs ? both : g.forward))
          return false;
    for (ir::OpId id : g.backward)
      for (ir::ValueId v : op(id).outputs)
        if (v != g.dq && v != g.dk && v != g.dv && !readers_.readOnlyBy(v, g.backward)) return false;
    return true;
  }

  const std::vector<ir::Dim>& shapeOf(ir::ValueId v) const { return graph_.value(v).type.shape; }

  // q [..., r, d]; k and v [..., s, d] of q's float type. Reshapes keep the
  // scores' rows of s whole (the softmax's axis) and the second undoes the
  // first; a causal mask sees square blocks of s rows, so that query row i is
  // at position i mod s (r a multiple of s).
  bool operandsFit(const AttentionGroup& g, const Forward& f) const {
    const ir::TensorType &q = graph_.value(g.q).type, &k = graph_.value(g.k).type, &v = graph_.value(g.v).type;
    if (q.dtype == ir::DType::I32 || k.dtype != q.dtype || v.dtype != q.dtype || !(k.shape == v.shape)) return false;
    if (q.shape.size() < 2 || q.shape.size() != k.shape.size() || !(q.shape.back() == k.shape.back())) return false;
    const ir::Dim& keys = k.shape[k.shape.size() - 2];
    const ir::Dim& rows = q.shape[q.shape.size() - 2];
    const auto& scores = shapeOf(op(*f.scoresMatMul).outputs.at(0));
    if (f.scoresReshape && !(shapeOf(op(*f.scoresReshape).outputs.at(0)).back() == keys)) return false;
    if (f.probsReshape.has_value() != f.scoresReshape.has_value()) return false;
    if (f.probsReshape && !(shapeOf(g.probs) == scores)) return false;
    if (!g.causal) return true;
    const auto& masked = shapeOf(op(*f.mask).outputs.at(0));
    if (rows.perBatch || keys.perBatch || keys.value < 1 || rows.value % keys.value != 0) return false;
    return masked.size() >= 2 && masked.back() == keys && masked[masked.size() - 2] == keys;
  }

  static bool consecutive(const std::vector<ir::OpId>& ids) {
    for (std::size_t i = 1; i < ids.size(); ++i)
      if (ids[i] != ids[i - 1] + 1) return false;
    return !ids.empty();
  }

  const ir::Graph& graph_;
  const ValueReaders& readers_;
  std::vector<std::vector<ir::OpId>> consumers_;
};

}  // namespace

std::vector<AttentionGroup> findAttentionGroups(const ir::Graph& graph, const ValueReaders& readers) {
  const Finder finder(graph, readers);
  std::vector<AttentionGroup> groups;
  for (ir::OpId id = 0; id < graph.ops().size(); ++id)
    if (graph.op(id).kind == K::Softmax && graph.op(id).phase == ir::Phase::Forward)
      if (auto g = finder.at(id)) groups.push_back(std::move(*g));
  return groups;
}

void FusedAttentions::set(std::vector<AttentionGroup> groups) {
  groups_ = std::move(groups);
  groupOfOp_.clear();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    for (ir::OpId id : groups_[g].forward) groupOfOp_[id] = g;
    for (ir::OpId id : groups_[g].backward) groupOfOp_[id] = g;
  }
}

std::optional<FusedAttentions::Run> FusedAttentions::at(const ir::Graph& graph, std::span<const ir::OpId> ops,
                                                         std::size_t i) const {
  auto found = groupOfOp_.find(ops[i]);
  if (found == groupOfOp_.end()) return std::nullopt;
  const AttentionGroup& g = groups_[found->second];
  const bool backward = graph.op(ops[i]).phase == ir::Phase::Backward;
  const std::vector<ir::OpId>& run = backward ? g.backward : g.forward;
  if (ops.size() - i < run.size() || !std::equal(run.begin(), run.end(), ops.begin() + static_cast<std::ptrdiff_t>(i)))
    throw std::runtime_error(fmt::format(
        "runs apart from the fused attention of ops {}..{} it belongs to (its {} must run as one)", run.front(),
        run.back(), backward ? "backward" : "forward"));
  return Run{&g, backward, run.size()};
}

}  // namespace meshflow::runtime
