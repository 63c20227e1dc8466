#include "passes/StagePartition.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace meshflow::passes {
namespace {

using ir::OpId;
using ir::OpKind;
using ir::Phase;
using ir::ValueId;

constexpr int kNoStage = -1;  // inputs and constants: every stage makes its own

bool isLeaf(OpKind kind) {
  return kind == OpKind::Input || kind == OpKind::Parameter || kind == OpKind::Constant;
}

bool isOptimizerUpdate(OpKind kind) { return kind == OpKind::SgdUpdate || kind == OpKind::AdamUpdate; }

std::string opText(const ir::Graph& graph, OpId id) {
  const ir::Op& op = graph.op(id);
  return fmt::format("op {} ({}{}{})", id, ir::opName(op.kind), op.scope.empty() ? "" : " in ", op.scope);
}

template <typename T>
std::vector<T> sorted(const std::set<T>& values) {
  return {values.begin(), values.end()};
}

class Partitioner {
 public:
  Partitioner(const TrainingGraph& training, const std::vector<int>& forwardStages, int stages)
      : graph_(training.graph), forwardStages_(forwardStages), stages_(stages) {
    if (stages < 1) throw StagePartitionError("a pipeline needs at least one stage");
    stash_.resize(static_cast<size_t>(stages));
    forwardCarry_.resize(static_cast<size_t>(stages));
    backwardCarry_.resize(static_cast<size_t>(stages));
  }

  StagePartition run() {
    assignForward();
    assignParameters();
    assignBackwardAndUpdate();
    result_.stages.resize(static_cast<size_t>(stages_));
    collectOps();
    routeValues();
    for (int s = 0; s < stages_; ++s) finishStage(s);
    result_.loss = graph_.outputs.at(0);
    result_.lossStage = stageOf(graph_.value(result_.loss).producer);
    return std::move(result_);
  }

 private:
  int& stageOf(OpId id) { return result_.stageOfOp[id]; }
  Phase phaseOf(ValueId v) const { return graph_.op(graph_.value(v).producer).phase; }

  void assignForward() {
    result_.stageOfOp.assign(graph_.ops().size(), kNoStage);
    for (OpId id = 0; id < graph_.ops().size(); ++id) {
      const ir::Op& op = graph_.op(id);
      if (op.phase != Phase::Forward || isLeaf(op.kind)) continue;
      int s = id < forwardStages_.size() ? forwardStages_[id] : kNoStage;
      if (s < 0 || s >= stages_)
        throw StagePartitionError(fmt::format("{} has no stage in 0..{}", opText(graph_, id), stages_ - 1));
      stageOf(id) = s;
      for (ValueId v : op.inputs) {
        int from = stageOf(graph_.value(v).producer);
        if (from > s)
          throw StagePartitionError(fmt::format("{} at stage {} reads a value made at the later stage {}",
                                                opText(graph_, id), s, from));
      }
    }
  }

  // A model parameter lives on the stage of its forward readers; one read by two
  // stages (tied weights) would need its gradients summed across stages.
  void assignParameters() {
    std::map<OpId, std::set<int>> readers;  // forward Parameter op -> stages of its forward readers
    for (OpId c = 0; c < graph_.ops().size(); ++c) {
      const ir::Op& consumer = graph_.op(c);
      if (consumer.phase != Phase::Forward || isLeaf(consumer.kind)) continue;
      for (ValueId v : consumer.inputs) {
        OpId producer = graph_.value(v).producer;
        if (graph_.op(producer).kind == OpKind::Parameter) readers[producer].insert(stageOf(c));
      }
    }
    for (OpId id = 0; id < graph_.ops().size(); ++id) {
      const ir::Op& op = graph_.op(id);
      if (op.phase != Phase::Forward || op.kind != OpKind::Parameter) continue;
      const std::set<int>& stages = readers[id];
      if (stages.size() > 1)
        throw StagePartitionError(fmt::format(
            "parameter '{}' is read by stages {} and {}: parameters shared across pipeline stages "
            "(tied weights) are not supported yet; keep the layers that share it in one stage",
            graph_.value(op.outputs[0]).name, *stages.begin(), *stages.rbegin()));
      stageOf(id) = stages.empty() ? 0 : *stages.begin();
    }
  }

  void assignBackwardAndUpdate() {
    for (OpId id = 0; id < graph_.ops().size(); ++id) {
      const ir::Op& op = graph_.op(id);
      if (op.phase == Phase::Forward) continue;
      if (op.forwardOp) {
        stageOf(id) = stageOf(*op.forwardOp);
        if (stageOf(id) == kNoStage && op.kind != OpKind::Constant)
          throw StagePartitionError(fmt::format("{} belongs to no stage", opText(graph_, id)));
      } else if (op.kind == OpKind::GlobalNorm) {
        result_.clip = GradientClip{id, 0};
      } else if (op.kind == OpKind::ClipScale && result_.clip) {
        result_.clip->clipScale = id;
      } else if (op.kind != OpKind::Constant) {
        throw StagePartitionError(fmt::format("{} belongs to no stage", opText(graph_, id)));
      }
    }
  }

  bool isClip(OpId id) const {
    return result_.clip && (id == result_.clip->globalNorm || id == result_.clip->clipScale);
  }

  void collectOps() {
    for (OpId id = 0; id < graph_.ops().size(); ++id) {
      int s = stageOf(id);
      if (s == kNoStage) continue;
      const ir::Op& op = graph_.op(id);
      StagePiece& piece = result_.stages[static_cast<size_t>(s)];
      if (op.kind == OpKind::Parameter) {
        piece.state.push_back(op.outputs.at(0));
      } else if (op.phase == Phase::Forward) {
        piece.forward.push_back(id);
      } else if (op.phase == Phase::Backward) {
        piece.backward.push_back(id);
      } else {
        piece.update.push_back(id);
      }
    }
  }

  template <typename Sets>
  void carry(Sets& sets, int from, int to, ValueId v) {
    for (int k = from; k < to; ++k) sets[static_cast<size_t>(k)].insert(v);
  }

  // Decides, for every value read across a stage or phase boundary, how it gets there.
  void routeValues() {
    for (OpId id = 0; id < graph_.ops().size(); ++id) {
      const ir::Op& op = graph_.op(id);
      int s = stageOf(id);
      if (s == kNoStage || isLeaf(op.kind)) continue;
      for (ValueId v : op.inputs) {
        OpId producer = graph_.value(v).producer;
        if (isLeaf(graph_.op(producer).kind) || isClip(producer)) continue;
        routeValue(id, s, v, stageOf(producer));
      }
    }
  }

  void routeValue(OpId reader, int s, ValueId v, int t) {
    Phase readPhase = graph_.op(reader).phase;
    if (readPhase == Phase::Update && (phaseOf(v) == Phase::Forward || t != s))
      throw StagePartitionError(fmt::format("{} reads a per-microbatch value of stage {}",
                                            opText(graph_, reader), t));
    if (phaseOf(v) == Phase::Forward) {
      if (t < s) carry(forwardCarry_, t, s, v);
      if (readPhase != Phase::Forward) {
        stash_[static_cast<size_t>(std::max(s, t))].insert(v);
        if (t > s) carry(backwardCarry_, s + 1, t + 1, v);
      }
      return;
    }
    if (t < s)
      throw StagePartitionError(fmt::format("{} at stage {} reads a gradient of the earlier stage {}",
                                            opText(graph_, reader), s, t));
    if (t > s) carry(backwardCarry_, s + 1, t + 1, v);
  }

  void finishStage(int s) {
    StagePiece& piece = result_.stages[static_cast<size_t>(s)];
    piece.stash = sorted(stash_[static_cast<size_t>(s)]);
    piece.forwardCarry = sorted(forwardCarry_[static_cast<size_t>(s)]);
    piece.backwardCarry = sorted(backwardCarry_[static_cast<size_t>(s)]);
    splitBackward(piece);
    collectGradients(piece);
    markInputGradGradients(piece);
    piece.forward = withConstants(piece.forward);
    piece.backward = withConstants(piece.backward);
    piece.inputGrad = withConstants(piece.inputGrad);
    piece.weightGrad = withConstants(piece.weightGrad);
    piece.update = withConstants(piece.update);
  }

  // I: the backward ops the backward carry depends on; W: the others.
  void splitBackward(StagePiece& piece) {
    std::set<ValueId> wanted(piece.backwardCarry.begin(), piece.backwardCarry.end());
    std::set<OpId> inputGrad;
    for (auto it = piece.backward.rbegin(); it != piece.backward.rend(); ++it) {
      const ir::Op& op = graph_.op(*it);
      bool needed = std::any_of(op.outputs.begin(), op.outputs.end(),
                                [&](ValueId v) { return wanted.count(v) > 0; });
      if (!needed) continue;
      inputGrad.insert(*it);
      wanted.insert(op.inputs.begin(), op.inputs.end());
    }
    std::set<ValueId> madeByWeightGrad;
    for (OpId id : piece.backward) {
      if (inputGrad.count(id)) {
        piece.inputGrad.push_back(id);
      } else {
        piece.weightGrad.push_back(id);
        const auto& outputs = graph_.op(id).outputs;
        madeByWeightGrad.insert(outputs.begin(), outputs.end());
      }
    }
    // What W reads that neither it nor the stash provides: I's results and the
    // incoming gradient, kept from I until W.
    std::set<ValueId> kept;
    std::set<ValueId> stash(piece.stash.begin(), piece.stash.end());
    for (OpId id : piece.weightGrad)
      for (ValueId v : graph_.op(id).inputs) {
        OpKind producer = graph_.op(graph_.value(v).producer).kind;
        if (!isLeaf(producer) && !madeByWeightGrad.count(v) && !stash.count(v)) kept.insert(v);
      }
    piece.inputGradOutputs = sorted(kept);
  }

  // Whether each gradient is made by I (the rest by W), so an executor knows which
  // step finishes it.
  void markInputGradGradients(StagePiece& piece) const {
    std::set<OpId> inputGrad(piece.inputGrad.begin(), piece.inputGrad.end());
    for (ValueId g : piece.gradients) piece.gradientFromInputGrad.push_back(inputGrad.count(graph_.value(g).producer) > 0);
  }

  void collectGradients(StagePiece& piece) {
    std::vector<std::pair<OpId, size_t>> order;  // (producer of the gradient, update op index)
    for (size_t i = 0; i < piece.update.size(); ++i) {
      const ir::Op& op = graph_.op(piece.update[i]);
      if (!isOptimizerUpdate(op.kind)) continue;
      order.push_back({graph_.value(op.inputs.at(1)).producer, i});
    }
    std::sort(order.begin(), order.end());
    for (auto [producer, i] : order) {
      const ir::Op& op = graph_.op(piece.update[i]);
      if (graph_.op(producer).phase != Phase::Backward)
        throw StagePartitionError(fmt::format("{} is not updated by a gradient", opText(graph_, piece.update[i])));
      piece.gradients.push_back(op.inputs.at(1));
      piece.gradientParameters.push_back(op.inputs.at(0));
    }
  }

  // `ops` plus the stage-less constants they read, in graph order.
  std::vector<OpId> withConstants(const std::vector<OpId>& ops) const {
    std::set<OpId> all(ops.begin(), ops.end());
    for (OpId id : ops)
      for (ValueId v : graph_.op(id).inputs) {
        OpId producer = graph_.value(v).producer;
        if (graph_.op(producer).kind == OpKind::Constant && result_.stageOfOp[producer] == kNoStage)
          all.insert(producer);
      }
    return sorted(all);
  }

  const ir::Graph& graph_;
  const std::vector<int>& forwardStages_;
  int stages_;
  StagePartition result_;
  std::vector<std::set<ValueId>> stash_, forwardCarry_, backwardCarry_;
};

}  // namespace

StagePartition partitionStages(const TrainingGraph& training, const std::vector<int>& stageOfForwardOp,
                               int stages) {
  return Partitioner(training, stageOfForwardOp, stages).run();
}

}  // namespace meshflow::passes
