// What one layer costs on one mesh configuration at one microbatch size: the
// intra-op pass (passes/IntraOpPass.h) on the layer's subgraph, reduced to the
// figures the stage search and the step-time model need. Identical layers
// (equal graphSignature) share one entry.
#pragma once

#include <cstdint>
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ir/Cluster.h"
#include "ir/Graph.h"
#include "passes/IntraOpPass.h"
#include "passes/LayerClustering.h"
#include "passes/PlanControl.h"
#include "passes/planner/LayerSubgraph.h"
#include "passes/planner/MeshConfigs.h"

namespace meshflow::passes {

/// Seconds and bytes per device. Times are per microbatch unless they say step.
struct LayerCost {
  double forward = 0;      ///< Compute + own collectives + resharding, forward share.
  double backward = 0;     ///< The same for backward (input and weight gradients).
  double weightGrad = 0;   ///< The weight-gradient part of backward.
  double attentionScoresForward = 0;  ///< Forward of the s×s attention ops (selective recompute).
  double parameterSync = 0;  ///< Gradient synchronisation, once per step.
  /// Bytes it all-reduces, by mesh axes (IntraOpResult::gradientSyncBytes).
  std::array<double, 4> syncBytes{};
  double update = 0;         ///< Optimizer step, once per step.
  double weights = 0, gradients = 0, optimizerState = 0;
  /// Gradients and optimizer state when they are sharded ZeRO-like over each
  /// parameter's data-parallel group (the same strategies; the reduce-scatter +
  /// all-gather that replaces the all-reduce moves the same bytes).
  double zeroGradients = 0, zeroOptimizerState = 0;
  double activations = 0;      ///< Held per microbatch without recomputation.
  double attentionScores = 0;  ///< The part of it selective recomputation drops.
  double inputs = 0;           ///< The layer's boundary inputs (what full recomputation keeps).
  /// What a zero-bubble W reads besides the stash, per microbatch: the
  /// gradients of the outputs of the ops that read a parameter.
  double weightGradInputs = 0;
  double boundaryBytes = 0;    ///< Bytes entering from earlier layers (whole microbatch).
  std::shared_ptr<const IntraOpResult> sharding;  ///< Per op of the layer's subgraph.
};

struct LayerCostOptions {
  int optimizerCopies = 2;
  std::vector<IntraOpPin> pins;
  /// For memory-lean solves: the per-device budget and the cluster's size, which
  /// give a layer's share of the budget on a configuration (budget / the layers
  /// a stage holds when the configuration's equal stages split the model).
  double memoryBudget = 0;
  std::int64_t devices = 1;
  /// Each solve is a safe point, and its sharding solver's time budget is cut
  /// to the time the run has left.
  PlanControl* control = nullptr;
};

/// Layers grouped by kind, with a cache of their costs.
class LayerCostTable {
 public:
  LayerCostTable(const ir::Graph& forward, const LayerClustering& layers,
                 const ir::DeviceSpec& device, LayerCostOptions options);

  int layerCount() const { return static_cast<int>(kindOf_.size()); }
  int kindCount() const { return static_cast<int>(subgraphs_.size()); }
  int kindOf(int layer) const { return kindOf_[layer]; }
  const LayerSubgraph& subgraph(int kind) const { return subgraphs_[kind]; }

  /// The cost of layer `layer` on `config` with `microbatch` samples per
  /// microbatch, `syncWeight` = 1/B; nothing when no strategy meets the pins.
  /// `lean`: the strategies that trade time for memory when the fastest ones
  /// take more than the layer's share of the budget (the intra-op objective
  /// with memory priced at the layer's latency per share; the fastest ones
  /// otherwise).
  const std::optional<LayerCost>& cost(int layer, int configIndex, const MeshConfig& config,
                                       std::int64_t microbatch, double syncWeight,
                                       bool lean = false);

  /// One cost() request, to solve ahead of time.
  struct Request {
    int layer;
    int configIndex;
    const MeshConfig* config;
    std::int64_t microbatch;
    double syncWeight;
    bool lean = false;
  };
  /// Solves the requests not cached yet on up to `threads` threads (the
  /// intra-op pass keeps no shared state), so that cost() finds them.
  void prefetch(const std::vector<Request>& requests, unsigned threads);

  std::size_t solves() const { return solves_; }

  /// From now on, a lean solve counts the activations of every microbatch in
  /// flight (microbatchesInFlight) where it counted one microbatch's, in its
  /// test against the layer's share and in its objective: leaner strategies,
  /// for a search that found nothing with the others (one microbatch's count
  /// leaves a layer whose fastest strategies pass it on them, however many
  /// microbatches a stage holds). Drops the lean costs cached; false when
  /// already counting.
  bool countMicrobatchesInFlight();

  /// From now on, a lean solve is the leanest: it counts the microbatches in
  /// flight and prices memory so far above time (kLeanestWeight) that it
  /// minimises the layer's memory and breaks ties by time, for every layer,
  /// whatever the budget. Its strategies do not depend on the budget, so a
  /// search with them that plans under some budget plans under every larger
  /// one: the planner's last search, when the other two found nothing. Drops
  /// the lean costs cached; false when already leanest.
  bool priceLeanest();

 private:
  std::optional<LayerCost> solve(int kind, const MeshConfig& config, std::int64_t microbatch,
                                 double syncWeight, double memoryWeight);
  /// The memory weight of a lean solve; 0 when the fastest strategies fit the
  /// layer's share of the budget with leanHolding microbatches' activations
  /// (or, when leanest, hold no memory at all).
  double leanWeight(const MeshConfig& config, const LayerCost& fastest, double syncWeight) const;
  /// Microbatches' activations a lean solve counts: 1, or microbatchesInFlight.
  std::int64_t leanHolding(const MeshConfig& config, double syncWeight) const;
  void dropLeanCosts();
  /// Equal stages of `config` that the cluster holds.
  std::int64_t stagesOf(const MeshConfig& config) const;
  /// Microbatches whose activations the first of those stages holds at once:
  /// min(stages, B), B = 1/syncWeight.
  std::int64_t microbatchesInFlight(const MeshConfig& config, double syncWeight) const;

  const ir::Graph& forward_;
  const ir::DeviceSpec& device_;
  LayerCostOptions options_;
  std::vector<int> kindOf_;
  std::vector<LayerSubgraph> subgraphs_;
  /// Per kind, per value of its subgraph: whether the backward reads it (what
  /// the runtime stashes from forward to backward).
  std::vector<std::vector<bool>> heldForBackward_;
  std::map<std::tuple<int, int, std::int64_t, double, bool>, std::optional<LayerCost>> cache_;
  std::atomic<std::size_t> solves_ = 0;
  bool countInFlight_ = false;
  bool leanest_ = false;
};

}  // namespace meshflow::passes
