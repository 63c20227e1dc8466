#include "runtime/parallel/ValueLifetimes.h"

#include <algorithm>
#include <iterator>
#include <map>

namespace meshflow::runtime {
namespace {

std::vector<ir::ValueId> sortedUnion(const std::vector<ir::ValueId>& a,
                                     const std::vector<ir::ValueId>& b) {
  std::vector<ir::ValueId> out;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

std::vector<ir::ValueId> sorted(std::vector<ir::ValueId> values) {
  std::sort(values.begin(), values.end());
  return values;
}

}  // namespace

std::vector<ir::ValueId> handedOn(const passes::StagePartition& partition,
                                  const passes::StageRecomputation& recomputation, int vs,
                                  ir::ActionKind action) {
  const passes::StagePiece& p = partition.stages.at(static_cast<std::size_t>(vs));
  const std::vector<ir::ValueId> gradients = sorted(p.gradients);
  switch (action) {
    case ir::ActionKind::kForward: {
      std::vector<ir::ValueId> out = sortedUnion(p.forwardCarry, recomputation.kept);
      return vs == partition.lossStage ? sortedUnion(out, {partition.loss}) : out;
    }
    case ir::ActionKind::kRecompute:  // and what the layers still to rerun start from
      return sortedUnion(p.stash, recomputation.kept);
    case ir::ActionKind::kBackward:
      return sortedUnion(p.backwardCarry, gradients);
    case ir::ActionKind::kInputGrad:
      return sortedUnion(sortedUnion(p.backwardCarry, gradients),
                         sortedUnion(p.stash, p.inputGradOutputs));
    case ir::ActionKind::kWeightGrad:
      return gradients;
  }
  return {};
}

const std::vector<ir::OpId>& opsOfRun(const passes::StagePiece& piece,
                                      const passes::StageRecomputation& recomputation, ir::ActionKind action) {
  const bool rebuilds = !recomputation.layers.empty();
  switch (action) {
    case ir::ActionKind::kForward:
      return piece.forward;
    case ir::ActionKind::kRecompute:
      return recomputation.rerun;
    case ir::ActionKind::kBackward:
      return rebuilds ? recomputation.backward : piece.backward;
    case ir::ActionKind::kInputGrad:
      return rebuilds ? recomputation.inputGrad : piece.inputGrad;
    case ir::ActionKind::kWeightGrad:
      return piece.weightGrad;
  }
  return piece.forward;
}

ReleasePlan planReleases(const ir::Graph& graph, std::span<const ir::OpId> ops,
                         const std::vector<ir::ValueId>& keep) {
  std::map<ir::ValueId, std::size_t> last;  // value → the last position that reads or makes it
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const ir::Op& op = graph.op(ops[i]);
    for (ir::ValueId v : op.inputs) last[v] = i;
    for (ir::ValueId v : op.outputs) last.emplace(v, i);
  }
  ReleasePlan plan;
  plan.after.resize(ops.size());
  for (const auto& [v, i] : last)
    if (!std::binary_search(keep.begin(), keep.end(), v)) plan.after[i].push_back(v);
  return plan;
}

std::vector<StageReleases> planStageReleases(
    const ir::Graph& graph, const passes::StagePartition& partition,
    const std::vector<passes::StageRecomputation>& recomputation) {
  std::vector<StageReleases> out;
  for (std::size_t vs = 0; vs < partition.stages.size(); ++vs) {
    const passes::StagePiece& p = partition.stages[vs];
    const passes::StageRecomputation& r = recomputation.at(vs);
    StageReleases releases;
    for (ir::ActionKind action : {ir::ActionKind::kForward, ir::ActionKind::kBackward, ir::ActionKind::kInputGrad,
                                  ir::ActionKind::kWeightGrad, ir::ActionKind::kRecompute})
      releases[static_cast<std::size_t>(action)] =
          planReleases(graph, opsOfRun(p, r, action), handedOn(partition, r, static_cast<int>(vs), action));
    out.push_back(std::move(releases));
  }
  return out;
}

}  // namespace meshflow::runtime
