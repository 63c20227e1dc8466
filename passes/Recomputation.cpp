#include "passes/Recomputation.h"

#include <algorithm>
#include <set>

namespace meshflow::passes {

const char* recomputeName(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kFull:
      return "full";
  }
  return "none";
}

std::optional<Recompute> parseRecompute(std::string_view name) {
  for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull})
    if (name == recomputeName(r)) return r;
  return std::nullopt;
}

bool isAttentionScore(const ir::Graph& g, const ir::Op& op) {
  using K = ir::OpKind;
  if (op.kind != K::Softmax && op.kind != K::CausalMask && op.kind != K::Scale &&
      op.kind != K::Dropout)
    return false;
  const auto& shape = g.value(op.outputs[0]).type.shape;
  return shape.size() == 4 && shape[2] == shape[3];
}

namespace {

// Graph inputs and parameters: a rerun binds them again.
bool isBound(const ir::Graph& g, ir::ValueId v) {
  ir::OpKind kind = g.op(g.value(v).producer).kind;
  return kind == ir::OpKind::Input || kind == ir::OpKind::Parameter;
}

}  // namespace

StageRecomputation planRecomputation(const ir::Graph& g, const StagePiece& piece, Recompute mode) {
  StageRecomputation out;
  if (mode == Recompute::kNone) {
    out.kept = piece.stash;
    return out;
  }
  const std::set<ir::OpId> here(piece.forward.begin(), piece.forward.end());
  auto madeHere = [&](ir::ValueId v) { return here.count(g.value(v).producer) > 0; };
  std::set<ir::ValueId> dropped, kept;
  for (ir::ValueId v : piece.stash) {
    const bool drop =
        madeHere(v) && (mode == Recompute::kFull || isAttentionScore(g, g.op(g.value(v).producer)));
    (drop ? dropped : kept).insert(v);
  }
  // The ops that rebuild the dropped values, back to what is kept or bound.
  std::set<ir::OpId> rerun;
  std::vector<ir::OpId> work;
  for (ir::ValueId v : dropped) work.push_back(g.value(v).producer);
  while (!work.empty()) {
    ir::OpId id = work.back();
    work.pop_back();
    if (!rerun.insert(id).second) continue;
    for (ir::ValueId v : g.op(id).inputs) {
      if (isBound(g, v) || kept.count(v)) continue;
      if (madeHere(v))
        work.push_back(g.value(v).producer);
      else
        kept.insert(v);  // carried in from an earlier stage
    }
  }
  out.kept.assign(kept.begin(), kept.end());
  out.rebuilt.assign(dropped.begin(), dropped.end());
  for (ir::OpId id : piece.forward)
    if (rerun.count(id)) out.rerun.push_back(id);
  return out;
}

}  // namespace meshflow::passes
