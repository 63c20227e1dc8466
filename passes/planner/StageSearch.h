// The search for pipeline stages at one microbatch count: which layers each
// stage holds, on which mesh configuration, with which variant.
//
// - alpaStages: Alpa's DP (passes/StageSolver.h) over every layer range ×
//   submesh shape × (view, variant), memory limits under 1F1B as
//   max_n_succ_stages. Its table and DP grow with layers² × shapes × device
//   units, so past a size bound it runs on runs of consecutive layers (cut at
//   layer pins), and on large clusters with a t_max gap (tmaxGap).
// - uniformStages: pipelines whose stages all take the same submesh shape and
//   view (Megatron's grid: p stages of D/p devices), each p with an exact
//   min-max partition of the layers, memory checked per stage position. Cheap at
//   thousands of devices.
//
// Both honour layer pins exactly where they can see stage positions (uniform)
// and report plans as stage lists for the planner to time under each schedule.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "passes/Planner.h"
#include "passes/planner/LayerCosts.h"
#include "passes/planner/MeshConfigs.h"
#include "passes/planner/StageModel.h"

namespace meshflow::passes {

struct StageChoice {
  int firstLayer = 0;
  int endLayer = 0;
  int config = 0;  ///< Index into the configs the search was given.
  StageVariant variant;
  StageEstimate estimate;
};

struct StageSearchInput {
  LayerCostTable* table = nullptr;
  const std::vector<MeshConfig>* configs = nullptr;
  const ir::Cluster* cluster = nullptr;
  std::vector<StageVariant> variants;
  std::int64_t microbatch = 1;  ///< Samples per microbatch.
  int microbatches = 1;         ///< B.
  double memoryBudget = 0;      ///< Per device.
  std::vector<LayerPin> layerPins;
  std::optional<int> stages;  ///< Exactly this many stages.
  /// Alpa's DP: 0 for the exact optimum, else its t_max enumeration's relative
  /// gap (StageProblem::tmaxGap).
  double tmaxGap = 0;
  /// Per config, whether to consider it at this microbatch size (the planner
  /// drops views whose data-parallel rows do not divide the microbatch).
  std::vector<char> usable;
  PlanControl* control = nullptr;  ///< Each DP run is a safe point.

  bool isUsable(int config) const { return usable.empty() || usable[config]; }
};

struct StageSearchResult {
  std::vector<StageChoice> stages;
  double objective = 0;  ///< Σ t_i + (B − 1)·max t_j
};

/// Alpa's DP; nothing when no plan fits (`why` says why).
std::optional<StageSearchResult> alpaStages(const StageSearchInput& input, std::string* why);

/// The best uniform pipeline of every mesh configuration and variant that fits
/// (the planner times each under every schedule: the DP objective leaves out
/// the once-per-step gradient synchronisation, which differs between them);
/// empty when none fits (`why` says why).
std::vector<StageSearchResult> uniformStages(const StageSearchInput& input, std::string* why);

/// Whether `stages` hold every layer pin (pinned layers inside the pinned stage).
bool honoursLayerPins(const std::vector<StageChoice>& stages, const std::vector<LayerPin>& pins);

}  // namespace meshflow::passes
