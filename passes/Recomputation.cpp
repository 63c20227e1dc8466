#include "passes/Recomputation.h"

#include <algorithm>
#include <map>
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

// What one stage's forward keeps and which of its ops rerun, by layer.
class Planner {
 public:
  Planner(const ir::Graph& g, const StagePiece& piece, Recompute mode, const std::vector<int>& layerOfOp)
      : g_(g), piece_(piece), layerOfOp_(layerOfOp), here_(piece.forward.begin(), piece.forward.end()) {
    findCheckpoints();
    for (ir::ValueId v : piece.stash) {
      const bool drop = madeHere(v) && !checkpoints_.count(v) &&
                        (mode == Recompute::kFull || isAttentionScore(g, g.op(g.value(v).producer)));
      (drop ? dropped_ : kept_).insert(v);
    }
    for (ir::ValueId v : dropped_) addRerun(g.value(v).producer);
  }

  StageRecomputation result() const {
    StageRecomputation out;
    out.kept.assign(kept_.begin(), kept_.end());
    out.rebuilt.assign(dropped_.begin(), dropped_.end());
    std::map<int, std::size_t> index;  // layer → its place in out.layers
    for (ir::OpId id : piece_.forward) {
      if (!rerun_.count(id)) continue;
      auto [it, fresh] = index.emplace(layerOf(id), out.layers.size());
      if (fresh) out.layers.emplace_back();
      out.layers[it->second].push_back(id);
    }
    std::map<ir::ValueId, std::size_t> layerOfRebuilt;
    for (ir::ValueId v : dropped_) layerOfRebuilt[v] = index.at(layerOf(g_.value(v).producer));
    // R reruns the layer the backward reads first; B and I the others, each
    // just before its first reader.
    std::vector<bool> done(out.layers.size(), false);
    for (ir::OpId id : piece_.backward) {
      for (ir::ValueId v : g_.op(id).inputs)
        if (auto it = layerOfRebuilt.find(v); it != layerOfRebuilt.end() && out.rerun.empty()) {
          out.rerun = out.layers[it->second];
          done[it->second] = true;
        }
      if (!out.rerun.empty()) break;
    }
    std::vector<bool> first = done;
    out.backward = interleave(piece_.backward, out.layers, layerOfRebuilt, done, false);
    out.inputGrad = interleave(piece_.inputGrad, out.layers, layerOfRebuilt, first, true);
    return out;
  }

 private:
  bool madeHere(ir::ValueId v) const { return here_.count(g_.value(v).producer) > 0; }
  int layerOf(ir::OpId id) const {
    return id < layerOfOp_.size() ? layerOfOp_[id] : -1;
  }

  // Values made by one layer of the stage and read by another's forward (a
  // constant is cheap to make again: never one).
  void findCheckpoints() {
    for (ir::OpId id : piece_.forward)
      for (ir::ValueId v : g_.op(id).inputs) {
        if (!madeHere(v)) continue;
        const ir::OpId producer = g_.value(v).producer;
        if (g_.op(producer).kind != ir::OpKind::Constant && layerOf(producer) != layerOf(id))
          checkpoints_.insert(v);
      }
  }

  // The ops that rebuild a dropped value, back to what is kept, bound or
  // made by another layer (a checkpoint, kept too).
  void addRerun(ir::OpId start) {
    std::vector<ir::OpId> work{start};
    while (!work.empty()) {
      ir::OpId id = work.back();
      work.pop_back();
      if (!rerun_.insert(id).second) continue;
      for (ir::ValueId v : g_.op(id).inputs) {
        if (isBound(g_, v) || kept_.count(v)) continue;
        if (madeHere(v) && !checkpoints_.count(v))
          work.push_back(g_.value(v).producer);
        else
          kept_.insert(v);  // carried in from an earlier stage, or another layer's
      }
    }
  }

  // `ops` with the rerun of each layer not `done` inserted before the first op
  // that reads what it rebuilds; with `rest`, the layers none of them read at
  // the end.
  std::vector<ir::OpId> interleave(const std::vector<ir::OpId>& ops,
                                   const std::vector<std::vector<ir::OpId>>& layers,
                                   const std::map<ir::ValueId, std::size_t>& layerOfRebuilt,
                                   std::vector<bool>& done, bool rest) const {
    std::vector<ir::OpId> out;
    auto rerun = [&](std::size_t l) {
      if (done[l]) return;
      done[l] = true;
      out.insert(out.end(), layers[l].begin(), layers[l].end());
    };
    for (ir::OpId id : ops) {
      for (ir::ValueId v : g_.op(id).inputs)
        if (auto it = layerOfRebuilt.find(v); it != layerOfRebuilt.end()) rerun(it->second);
      out.push_back(id);
    }
    if (rest)
      for (std::size_t l = 0; l < layers.size(); ++l) rerun(l);
    return out;
  }

  const ir::Graph& g_;
  const StagePiece& piece_;
  const std::vector<int>& layerOfOp_;
  const std::set<ir::OpId> here_;
  std::set<ir::ValueId> checkpoints_, dropped_, kept_;
  std::set<ir::OpId> rerun_;
};

}  // namespace

StageRecomputation planRecomputation(const ir::Graph& g, const StagePiece& piece, Recompute mode,
                                     const std::vector<int>& layerOfOp) {
  if (mode == Recompute::kNone) {
    StageRecomputation out;
    out.kept = piece.stash;
    return out;
  }
  return Planner(g, piece, mode, layerOfOp).result();
}

}  // namespace meshflow::passes
