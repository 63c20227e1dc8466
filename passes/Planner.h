// The planner: a forward graph and a cluster in, an ir::Plan out (Alpa's
// inter-operator pass with the intra-operator pass inside it, DESIGN.md "The
// solvers"). It runs, in order:
//
//   1. layer clustering (passes/LayerClustering.h): the user's layer scopes, or
//      Alpa's G(k, r) when the graph has none;
//   2. per distinct layer (identical repeated blocks share one), per submesh
//      shape, logical view and microbatch size: the intra-op pass
//      (passes/IntraOpPass.h) on the layer's subgraph, giving its per-microbatch
//      compute and communication, its once-per-step gradient synchronisation and
//      its memory;
//   3. per microbatch count: the stage DP (passes/StageSolver.h) on stage
//      latencies summed from those layer costs, with memory limits under the
//      schedule, recomputation where memory demands it;
//   4. per schedule (1F1B, GPipe, interleaved, ZB-H1): the step time of the best
//      stages, the least of which is the plan;
//   5. placement (passes/Placement.h) of the stages' submeshes on devices.
//
// Every hint of a `schedule` block is honoured or refused with a PlanningError
// that names it. The result is deterministic.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "ir/Graph.h"
#include "ir/PipelineSchedule.h"
#include "ir/Plan.h"
#include "passes/LayerClustering.h"
#include "passes/PlanControl.h"

namespace meshflow::passes {

/// pin(layers = a..b, stage = s): layers [firstLayer, endLayer) run in stage s.
struct LayerPin {
  int firstLayer = 0;
  int endLayer = 0;
  int stage = 0;
};

/// pin(op = "block*.mlp.fc1", sharding = "RS1"): every op whose scope matches
/// the glob pattern (`*` any run of characters) and whose first output has the
/// spec's rank produces that spec.
struct OpShardingPin {
  std::string pattern;
  std::string spec;
};

/// pin(stage = s, devices = [...]): stage s holds these device ids.
struct DevicePin {
  int stage = 0;
  std::vector<int> devices;
};

/// exclude(devices = [...]) or exclude(nodes = [...]): no stage uses these
/// devices (a node stands for all of its devices). The planner plans on the
/// nodes no exclusion touches; the other devices of a node an exclusion takes
/// part of stay idle (docs/planning.md, "Exclusions").
struct DeviceExclusion {
  bool nodes = false;    ///< `ids` are node indices, not device ids.
  std::vector<int> ids;
};

/// What the user asked for; every optional left empty is the planner's choice.
struct PlanRequest {
  std::int64_t globalBatch = 1;  ///< Samples per step.
  /// Layers for the stage DP; 0 means one per top-level layer scope (`block3`),
  /// or 16 when the graph has no scopes.
  int layers = 0;

  // Schedule hints (LANGUAGE.md, "Schedule hints").
  std::optional<int> microbatches;
  std::optional<ir::ScheduleKind> schedule;
  std::optional<int> virtualStages;     ///< Chunks per rank, interleaved only.
  std::optional<int> stages;            ///< Pipeline stages.
  std::optional<int> maxTensorParallel; ///< Largest mesh dimension 1 of any stage.
  std::optional<int> dataParallel;      ///< Exact mesh dimension 0 of every stage.
  std::optional<double> memoryPerDevice;  ///< Bytes; default: the device's memory.
  std::optional<std::string> recompute;   ///< "none", "selective" or "full".
  int optimizerCopies = 2;  ///< Optimizer state per parameter (Adam 2, SGD+momentum 1, SGD 0).
  /// ZeRO-like sharded gradients and optimizer state (the `shard_optimizer`
  /// hint): always, never, or (empty) where the planner finds it pays. Only
  /// stages with data-parallel replicas shard (a single replica has nothing
  /// to shard over); benchmarks also use it to evaluate published plans.
  std::optional<bool> shardOptimizerState;
  std::vector<LayerPin> layerPins;
  std::vector<OpShardingPin> opPins;
  std::vector<DevicePin> devicePins;
  std::vector<DeviceExclusion> exclusions;

  /// Simulates one step of a finished plan and returns its seconds: the
  /// runtime's discrete-event simulator (runtime/sim/PlanSimulation.h), which
  /// passes/ cannot link itself. When set, the planner makes its final choice
  /// by simulation: it places the few candidates its estimate ranks best,
  /// simulates each and returns the fastest. Unset, the best estimate wins.
  std::function<double(const ir::Plan&, const ir::Cluster&)> simulateStep;

  /// Cancellation, time budget, progress and pass times (passes/PlanControl.h);
  /// null: none. planTraining begins and ends a run on it.
  PlanControl* control = nullptr;
};

/// A request the planner cannot meet. `hint` names the schedule hint at fault
/// ("microbatches", "memory_per_device", "pin(layers = 0..4, stage = 0)",
/// "exclude(nodes = [3])", …),
/// empty when the problem is not one hint's.
class PlanningError : public std::runtime_error {
 public:
  PlanningError(std::string hint, const std::string& message)
      : std::runtime_error(message), hint_(std::move(hint)) {}
  const std::string& hint() const { return hint_; }

 private:
  std::string hint_;
};

/// Plans training of `forward` (a forward graph whose output is the loss) on
/// `cluster`. Throws PlanningError for requests that cannot be met, and
/// PlanInterrupted when request.control cancels it or its time runs out.
ir::Plan planTraining(const ir::Graph& forward, const ir::Cluster& cluster,
                      const PlanRequest& request);

/// The layers the planner forms from `forward`: `layers` of them by G(k, r), or
/// with `layers` = 0 the scope layers (else G(k, r) into at most 16).
LayerClustering planLayers(const ir::Graph& forward, int layers);

/// The (virtual) stage of every op of `forward` under `plan`, which was planned
/// for it: how a runtime maps the plan's layer ranges back to ops. Throws
/// PlanningError when the plan's layers do not cover the graph.
std::vector<int> stageOfForwardOps(const ir::Graph& forward, const ir::Plan& plan);

/// The layer of every op of `forward` under `plan` (its layers, as
/// stageOfForwardOps forms them): where a recomputing stage checkpoints.
std::vector<int> layerOfForwardOps(const ir::Graph& forward, const ir::Plan& plan);

}  // namespace meshflow::passes
