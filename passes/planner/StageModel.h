// A candidate stage priced from its layers' costs: per-microbatch latency with
// recomputation and the activation transfer from the previous stage, the
// once-per-step gradient synchronisation and optimizer step, and its memory.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "passes/Recomputation.h"
#include "passes/planner/LayerCosts.h"

namespace meshflow::passes {

/// The per-stage choices besides the mesh: recomputation and ZeRO.
struct StageVariant {
  Recompute recompute = Recompute::kNone;
  bool zero = false;
  bool lean = false;  ///< The layers' memory-lean strategies (LayerCostTable::cost).
};

/// How a rank's schedule holds microbatches at its peak (StepTime.h holdingOf).
struct Holding {
  double held = 1;       ///< Microbatches whose kept activations are in flight.
  bool steady = true;    ///< A forward follows a backward: the gradients are held with them.
  double deferred = 0;   ///< Of those, waiting for a deferred W with their whole stash.
};

struct StageEstimate {
  bool feasible = false;      ///< Every layer has a cost (the pins allow the mesh).
  double forward = 0;         ///< Per microbatch, the transfer in included.
  double backward = 0;        ///< Per microbatch, recomputation included.
  double weightGrad = 0;
  double parameterSync = 0;   ///< Per step.
  std::array<double, 4> syncBytes{};  ///< Its bytes by mesh axes (LayerCost::syncBytes).
  double update = 0;          ///< Per step.
  double resident = 0;        ///< Weights, gradients, optimizer state.
  double gradients = 0;       ///< The gradients' part of resident.
  /// The weight gradients a backward accumulates, whole even when ZeRO shards
  /// them afterwards (the reduce-scatter follows the last backward).
  double accumulatedGradients = 0;
  double heldPerMicrobatch = 0;  ///< Activations kept from forward to backward.
  /// Kept from I to its deferred W under zero-bubble schedules besides the
  /// stash: the output gradients of the ops that read a parameter.
  double deferredPerMicrobatch = 0;
  /// Recomputation: the most one layer rebuilds, live during one microbatch's
  /// backward (the layers are rebuilt one at a time, passes/Recomputation.h).
  double workspace = 0;
  /// The whole stash, kept or rebuilt, that a zero-bubble I hands to its
  /// deferred W (a recomputing I rebuilds every layer for it).
  double stash = 0;
  double transferIn = 0;      ///< Bytes received from the previous stage per microbatch.
  double transferSeconds = 0;  ///< Its time, included once in forward and once in backward.
  double recomputedForward = 0;  ///< Seconds of forward work done again in backward.
  /// The part of recomputedForward that RUN R reruns ahead of the backward:
  /// the last layer of the range that rebuilds anything (the one the backward
  /// needs first); the other layers rerun inside the backward
  /// (passes/Recomputation.h). Set by RangePricer::estimate, not summed.
  double rerunAhead = 0;

  double latency() const { return forward + backward; }
  /// Recomputed forward work as a share of the stage's own forward work.
  double recomputeShare() const;
  /// Adds another stage's figures (a prefix of layers): sums, and the larger
  /// workspace. Transfers and feasibility are left alone.
  StageEstimate& operator+=(const StageEstimate& other);
  /// The figures summed over layers [a, b) from prefix sums over [0, b) (this)
  /// and [0, a) (`prefix`), but the workspace (RangePricer::estimate's).
  StageEstimate minus(const StageEstimate& prefix) const;
  /// Peak bytes with `held` microbatches in flight, the gradients held with
  /// them: an upper bound of memory(Holding) for the search.
  double memory(double held) const { return resident + held * heldPerMicrobatch + workspace; }
  /// Peak bytes as the runtime holds them under a schedule (docs/planning.md,
  /// "Memory"; StepTime.h holdingOf).
  double memory(const Holding& holding) const;
};

/// Prices layer ranges on one mesh configuration with one variant, in O(1) per
/// range after O(L log L) preparation: the layers' costs are fetched once
/// (solving the intra-op problem of each layer kind at most once) and summed by
/// prefix sums.
class RangePricer {
 public:
  RangePricer(LayerCostTable& table, int configIndex, const MeshConfig& config,
              std::int64_t microbatch, double syncWeight, StageVariant variant,
              const ir::Cluster& cluster);

  /// Whether every layer has a cost on this configuration (pins may forbid one).
  bool feasible(int first, int end) const;
  /// Layers [first, end) as one stage; infeasible when a layer has no cost.
  StageEstimate estimate(int first, int end) const;
  const MeshConfig& config() const { return config_; }
  StageVariant variant() const { return variant_; }

 private:
  MeshConfig config_;
  StageVariant variant_;
  const ir::Cluster& cluster_;
  std::vector<StageEstimate> prefix_;    // prefix_[l]: sums over layers [0, l)
  std::vector<int> missing_;             // prefix count of layers without a cost
  std::vector<double> transferIn_;       // per layer: bytes entering it
  std::vector<double> rerun_;            // per layer: its recomputed forward seconds
  double workspace(int first, int end) const;
  std::vector<std::vector<double>> workspaceMax_;  // sparse table of the layers' workspaces
};

}  // namespace meshflow::passes
