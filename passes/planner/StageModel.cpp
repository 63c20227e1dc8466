#include "passes/planner/StageModel.h"

#include <algorithm>

#include "passes/planner/StepReplay.h"

namespace meshflow::passes {

namespace {

// One direction of an activation between stages, as lowering sends it: each
// device sends its data-parallel row's share to its counterpart (replicated
// over the row, as after a tensor-parallel block). A stage of whole nodes
// receives over the network, each device at its share of the node's; so does
// a sub-node stage on a cluster of several nodes, whose place is not known
// yet: a pipeline of them crosses nodes somewhere, and its slowest boundary
// sets its pace.
double transferSeconds(double bytes, const MeshConfig& config, const ir::Cluster& cluster) {
  if (bytes <= 0) return 0;
  const double perDevice = bytes / double(config.view[0]);
  if (cluster.nodes > 1)
    return cluster.interNode.latency +
           perDevice * secondsPerByte(cluster.interNode.bandwidth /
                                      double(std::max<std::int64_t>(1, cluster.devicesPerNode)));
  return cluster.intraNode.latency + perDevice * secondsPerByte(cluster.intraNode.bandwidth);
}

void addLayer(StageEstimate& e, const LayerCost& c, Recompute recompute, bool zero) {
  e.forward += c.forward;
  e.backward += c.backward;
  e.weightGrad += c.weightGrad;
  e.parameterSync += c.parameterSync;
  for (std::size_t a = 0; a < e.syncBytes.size(); ++a) e.syncBytes[a] += c.syncBytes[a];
  e.update += c.update;
  double gradients = zero ? c.zeroGradients : c.gradients;
  e.resident += c.weights + gradients + (zero ? c.zeroOptimizerState : c.optimizerState);
  e.gradients += gradients;
  e.accumulatedGradients += c.gradients;
  e.deferredPerMicrobatch += c.weightGradInputs;
  e.stash += c.activations;
  switch (recompute) {
    case Recompute::kNone:
      e.heldPerMicrobatch += c.activations;
      break;
    // As the runtime recomputes (passes/Recomputation.h): each layer is
    // rebuilt right before its backward, so one layer's rebuilt activations
    // live at a time (a zero-bubble I rebuilds them all for its W).
    case Recompute::kSelective:
      e.heldPerMicrobatch += c.activations - c.attentionScores;
      e.backward += c.attentionScoresForward;
      e.workspace = std::max(e.workspace, c.attentionScores);
      e.recomputedForward += c.attentionScoresForward;
      break;
    case Recompute::kFull:
      // Each layer keeps its inputs (its checkpoints) and reruns its forward.
      e.heldPerMicrobatch += c.inputs;
      e.backward += c.forward;
      e.workspace = std::max(e.workspace, c.activations);
      e.recomputedForward += c.forward;
      break;
  }
}

}  // namespace

double StageEstimate::recomputeShare() const {
  double own = forward - transferSeconds;
  return own > 0 ? recomputedForward / own : 0;
}

// The runtime frees every value at its last use (runtime/parallel/
// ValueLifetimes.h): between a microbatch's forward and its backward only
// what the forward keeps lives, and the weight gradients exist from the
// stage's first backward to the update. With `steady` a forward runs after a
// backward, so the gradients are held with every microbatch in flight;
// otherwise (GPipe, or no more microbatches than the rank holds) the peak is
// the first backward's start, before any gradient, or a later one's with a
// microbatch fewer (or, with one microbatch, the gradients alone); a later
// microbatch's backward ends with its fresh weight gradients beside the sums
// until it adds them in. A recomputing backward rebuilds one layer at a time
// (workspace); a zero-bubble rank's deferred microbatches keep their whole
// stash and I's outputs until their W.
double StageEstimate::memory(const Holding& h) const {
  const double base = resident - gradients;
  const double k = heldPerMicrobatch;
  const double layer = workspace;  // one layer rebuilt at a time
  const double g = accumulatedGradients;
  const double accumulating =
      h.held > 1 || h.steady ? 2 * g + std::max(h.held - (h.steady ? 1 : 2), 0.0) * k : 0;
  const double activations = std::max(
      accumulating, h.steady ? g + h.held * k + layer
                             : std::max(h.held * k + layer,
                                        g + (h.held > 1 ? (h.held - 1) * k + layer : 0)));
  return base + activations + h.deferred * (stash - k + deferredPerMicrobatch);
}

StageEstimate& StageEstimate::operator+=(const StageEstimate& o) {
  forward += o.forward;
  backward += o.backward;
  weightGrad += o.weightGrad;
  parameterSync += o.parameterSync;
  for (std::size_t a = 0; a < syncBytes.size(); ++a) syncBytes[a] += o.syncBytes[a];
  update += o.update;
  resident += o.resident;
  gradients += o.gradients;
  accumulatedGradients += o.accumulatedGradients;
  heldPerMicrobatch += o.heldPerMicrobatch;
  deferredPerMicrobatch += o.deferredPerMicrobatch;
  recomputedForward += o.recomputedForward;
  workspace = std::max(workspace, o.workspace);
  stash += o.stash;
  return *this;
}

StageEstimate StageEstimate::minus(const StageEstimate& p) const {
  StageEstimate e;
  e.forward = forward - p.forward;
  e.backward = backward - p.backward;
  e.weightGrad = weightGrad - p.weightGrad;
  e.parameterSync = parameterSync - p.parameterSync;
  for (std::size_t a = 0; a < syncBytes.size(); ++a) e.syncBytes[a] = syncBytes[a] - p.syncBytes[a];
  e.update = update - p.update;
  e.resident = resident - p.resident;
  e.gradients = gradients - p.gradients;
  e.accumulatedGradients = accumulatedGradients - p.accumulatedGradients;
  e.heldPerMicrobatch = heldPerMicrobatch - p.heldPerMicrobatch;
  e.deferredPerMicrobatch = deferredPerMicrobatch - p.deferredPerMicrobatch;
  e.recomputedForward = recomputedForward - p.recomputedForward;
  e.stash = stash - p.stash;  // the workspace, a maximum, is the range's (RangePricer)
  return e;
}

RangePricer::RangePricer(LayerCostTable& table, int configIndex, const MeshConfig& config,
                         std::int64_t microbatch, double syncWeight, StageVariant variant,
                         const ir::Cluster& cluster)
    : config_(config), variant_(variant), cluster_(cluster) {
  int layers = table.layerCount();
  prefix_.assign(layers + 1, StageEstimate{});
  missing_.assign(layers + 1, 0);
  transferIn_.assign(layers, 0);
  rerun_.assign(layers, 0);
  std::vector<double> workspace(static_cast<std::size_t>(layers), 0);
  for (int l = 0; l < layers; ++l) {
    const auto& cost = table.cost(l, configIndex, config, microbatch, syncWeight, variant.lean);
    StageEstimate one;
    if (cost) {
      addLayer(one, *cost, variant.recompute, variant.zero);
      transferIn_[l] = cost->boundaryBytes;
      workspace[static_cast<std::size_t>(l)] = one.workspace;
      rerun_[l] = one.recomputedForward;
    }
    missing_[l + 1] = missing_[l] + (cost ? 0 : 1);
    (prefix_[l + 1] = prefix_[l]) += one;
  }
  workspaceMax_.push_back(workspace);
  for (std::size_t width = 1; 2 * width <= static_cast<std::size_t>(layers); width *= 2) {
    const std::vector<double>& prev = workspaceMax_.back();
    std::vector<double> next(static_cast<std::size_t>(layers) - 2 * width + 1);
    for (std::size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + width]);
    workspaceMax_.push_back(std::move(next));
  }
}

double RangePricer::workspace(int first, int end) const {
  std::size_t level = 0;
  while ((std::size_t{2} << level) <= static_cast<std::size_t>(end - first)) ++level;
  return std::max(workspaceMax_[level][static_cast<std::size_t>(first)],
                  workspaceMax_[level][static_cast<std::size_t>(end) - (std::size_t{1} << level)]);
}

bool RangePricer::feasible(int first, int end) const { return missing_[end] == missing_[first]; }

StageEstimate RangePricer::estimate(int first, int end) const {
  if (!feasible(first, end)) return StageEstimate{};
  StageEstimate e = prefix_[end].minus(prefix_[first]);
  e.workspace = workspace(first, end);
  // Synchronised as lowering does it: the replicas' buckets, then the sums
  // inside the mesh (the layers' figure is one collective per tensor).
  e.parameterSync =
      PlacedSync::onMesh(config_.view, cluster_, e.gradients, e.syncBytes, variant_.zero).seconds();
  for (int l = end - 1; l >= first && e.rerunAhead == 0; --l) e.rerunAhead = rerun_[l];
  // The activation arrives before forward; its gradient leaves after backward.
  if (first > 0) {
    e.transferIn = transferIn_[first];
    e.transferSeconds = transferSeconds(e.transferIn, config_, cluster_);
    e.forward += e.transferSeconds;
    e.backward += e.transferSeconds;
  }
  e.feasible = true;
  return e;
}

}  // namespace meshflow::passes
