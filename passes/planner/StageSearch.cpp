#include "passes/planner/StageSearch.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "passes/StageSolver.h"

namespace meshflow::passes {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Alpa's table grows as L²·S·G and its DP as (stage counts)·L·devices; past
// these sizes the DP runs on groups of consecutive layers (dpLayerLimit).
constexpr double kMaxTableEntries = 4e6;
constexpr double kMaxDpWork = 2e8;

bool splitsPin(int first, int end, const LayerPin& pin) {
  bool intersects = first < pin.endLayer && end > pin.firstLayer;
  bool contains = first <= pin.firstLayer && end >= pin.endLayer;
  return intersects && !contains;
}

// Whether layers [first, end) may form stage `index` (−1: position unknown).
bool allowedByPins(int first, int end, int index, const std::vector<LayerPin>& pins) {
  for (const LayerPin& pin : pins) {
    if (splitsPin(first, end, pin)) return false;
    bool holds = first <= pin.firstLayer && end >= pin.endLayer;
    if (index >= 0 && holds != (index == pin.stage)) return false;
    // Stage 0 starts at layer 0: a later stage must not hold stage 0's layers.
    if (index < 0 && pin.stage == 0 && first > 0 && holds) return false;
  }
  return true;
}

// The most stages that may follow a stage under 1F1B (it holds one microbatch
// more than it has successors), as max_n_succ_stages: −1 when not even one
// microbatch fits.
int successorLimit(const StageEstimate& e, int microbatches, double budget) {
  double room = budget - e.resident - e.workspace;
  if (room < e.heldPerMicrobatch) return -1;
  if (e.heldPerMicrobatch <= 0) return StageProblem::kUnlimited;
  double held = std::floor(room / e.heldPerMicrobatch);
  if (held >= microbatches) return StageProblem::kUnlimited;
  return static_cast<int>(held) - 1;
}

struct Entry {
  int config;
  int variant;
};

class Pricers {
 public:
  explicit Pricers(const StageSearchInput& in) : in_(in) {
    pricers_.resize(in.configs->size() * in.variants.size());
  }
  const RangePricer& get(int config, int variant) {
    auto& slot = pricers_[std::size_t(config) * in_.variants.size() + variant];
    if (!slot)
      slot = std::make_unique<RangePricer>(*in_.table, config, (*in_.configs)[config],
                                           in_.microbatch, 1.0 / in_.microbatches,
                                           in_.variants[variant], *in_.cluster);
    return *slot;
  }

 private:
  const StageSearchInput& in_;
  std::vector<std::unique_ptr<RangePricer>> pricers_;
};

StageSearchResult resultOf(std::vector<StageChoice> stages, int microbatches) {
  StageSearchResult r;
  double sum = 0, tMax = 0;
  for (const StageChoice& s : stages) {
    sum += s.estimate.latency();
    tMax = std::max(tMax, s.estimate.latency());
  }
  r.objective = sum + (microbatches - 1) * tMax;
  r.stages = std::move(stages);
  return r;
}

// The most layer groups Alpa's DP may see: its table grows as G²·S·C and its
// work per t_max as G³·S·(device units), so large models on large clusters run
// it on runs of consecutive layers (DESIGN.md, "The solvers").
int dpLayerLimit(int layers, const std::vector<SubmeshShape>& shapes, std::size_t configsPerShape,
                 const ir::Cluster& cluster) {
  int unit = int(cluster.deviceCount());
  for (SubmeshShape s : shapes) unit = std::gcd(unit, s.devices());
  double units = double(cluster.deviceCount()) / unit;
  double s = double(shapes.size());
  int limit = layers;
  while (limit > 1 && (double(limit) * limit * s * double(configsPerShape) > kMaxTableEntries ||
                       double(limit) * limit * limit * s * units > kMaxDpWork))
    --limit;
  return limit;
}

// Group boundaries 0 = b_0 < … < b_G = layers: about `limit` runs of equal
// length, cut also at every layer pin's ends so that pins stay expressible.
std::vector<int> groupBounds(int layers, int limit, const std::vector<LayerPin>& pins) {
  std::vector<int> bounds;
  for (int k = 0; k <= limit; ++k) bounds.push_back(int(std::int64_t(layers) * k / limit));
  for (const LayerPin& pin : pins)
    for (int b : {pin.firstLayer, pin.endLayer})
      if (b > 0 && b < layers) bounds.push_back(b);
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  return bounds;
}

}  // namespace

bool honoursLayerPins(const std::vector<StageChoice>& stages, const std::vector<LayerPin>& pins) {
  for (std::size_t k = 0; k < stages.size(); ++k)
    if (!allowedByPins(stages[k].firstLayer, stages[k].endLayer, int(k), pins)) return false;
  return true;
}

std::optional<StageSearchResult> alpaStages(const StageSearchInput& in, std::string* why) {
  const auto& configs = *in.configs;
  int layers = in.table->layerCount();
  std::vector<SubmeshShape> shapes;
  std::vector<std::vector<Entry>> entries;
  for (int c = 0; c < int(configs.size()); ++c) {
    if (!in.isUsable(c)) continue;
    auto it = std::find(shapes.begin(), shapes.end(), configs[c].shape);
    if (it == shapes.end()) {
      shapes.push_back(configs[c].shape);
      entries.emplace_back();
      it = shapes.end() - 1;
    }
    for (int v = 0; v < int(in.variants.size()); ++v) entries[it - shapes.begin()].push_back({c, v});
  }
  if (shapes.empty()) {
    *why = "no mesh configuration suits the microbatch";
    return std::nullopt;
  }
  std::size_t configsPerShape = 0;
  for (const auto& e : entries) configsPerShape = std::max(configsPerShape, e.size());
  std::vector<int> bounds =
      groupBounds(layers, dpLayerLimit(layers, shapes, configsPerShape, *in.cluster), in.layerPins);
  int groups = int(bounds.size()) - 1;
  StageProblem p = StageProblem::make(groups, in.microbatches, int(in.cluster->nodes),
                                      int(in.cluster->devicesPerNode), shapes,
                                      int(configsPerShape));
  p.maxSuccStages.assign(p.tableSize(), StageProblem::kUnlimited);
  p.tmaxGap = in.tmaxGap;
  Pricers pricers(in);
  for (int i = 0; i < groups; ++i)
    for (int j = i; j < groups; ++j) {
      int first = bounds[i], end = bounds[j + 1];
      if (!allowedByPins(first, end, -1, in.layerPins)) continue;
      for (std::size_t s = 0; s < shapes.size(); ++s)
        for (std::size_t g = 0; g < entries[s].size(); ++g) {
          StageEstimate e = pricers.get(entries[s][g].config, entries[s][g].variant).estimate(first, end);
          if (!e.feasible) continue;
          std::size_t index = p.index(i, j, int(s), int(g));
          p.cost[index] = e.latency();
          p.maxSuccStages[index] = successorLimit(e, in.microbatches, in.memoryBudget);
        }
    }
  StageSolution solution;
  try {
    solution = solveStages(p, {.control = in.control});
  } catch (const StageError& e) {
    *why = e.what();
    return std::nullopt;
  }
  std::vector<StageChoice> stages;
  for (const Stage& st : solution.stages) {
    Entry entry = entries[st.submesh][st.config];
    int first = bounds[st.firstLayer], end = bounds[st.endLayer];
    StageChoice c{first, end, entry.config, in.variants[entry.variant], {}};
    c.estimate = pricers.get(entry.config, entry.variant).estimate(first, end);
    stages.push_back(c);
  }
  return resultOf(std::move(stages), in.microbatches);
}

namespace {

using Ranges = std::vector<std::pair<int, int>>;

// Greedy packing under a latency cap: each stage, in order, takes as many layers
// as the cap and its memory at its position allow (1F1B: position k of p holds
// min(p − k, B) microbatches). Taking fewer layers never helps a later stage,
// so the greedy uses the fewest stages any split under the cap can; with fewer
// than p, splitting stages only lowers latencies and later stages' memory.
std::optional<Ranges> packUnderCap(const RangePricer& pricer, int layers, int p, double cap,
                                   const StageSearchInput& in) {
  Ranges ranges;
  int first = 0;
  while (first < layers) {
    if (int(ranges.size()) == p) return std::nullopt;
    double held = std::min(p - int(ranges.size()), in.microbatches);
    int end = first;
    while (end < layers) {
      StageEstimate e = pricer.estimate(first, end + 1);
      if (!e.feasible || e.latency() > cap || e.memory(held) > in.memoryBudget) break;
      ++end;
    }
    if (end == first) return std::nullopt;
    ranges.push_back({first, end});
    first = end;
  }
  // Split the stage with the most layers until there are p.
  while (int(ranges.size()) < p) {
    auto widest = std::max_element(ranges.begin(), ranges.end(), [](auto a, auto b) {
      return a.second - a.first < b.second - b.first;
    });
    if (widest->second - widest->first < 2) return std::nullopt;
    int mid = widest->first + (widest->second - widest->first) / 2;
    std::pair<int, int> tail{mid, widest->second};
    widest->second = mid;
    ranges.insert(widest + 1, tail);
  }
  return ranges;
}

// The min-max partition into exactly p stages without pins: bisection on the
// latency cap with greedy feasibility at each. The largest stage of the
// packing at the final cap is within a relative 1e-12 of the optimum (the
// optimum is some range's latency, and feasibility is monotone in the cap).
std::optional<Ranges> greedyPartition(const RangePricer& pricer, int layers, int p,
                                      const StageSearchInput& in) {
  StageEstimate whole = pricer.estimate(0, layers);
  if (!whole.feasible) return std::nullopt;
  double hi = whole.latency();
  std::optional<Ranges> best = packUnderCap(pricer, layers, p, hi, in);
  if (!best) return std::nullopt;
  double lo = 0;
  for (int l = 0; l < layers; ++l) lo = std::max(lo, pricer.estimate(l, l + 1).latency());
  lo *= 1 - 1e-12;  // the largest single layer is always feasible as a cap's floor
  while (hi - lo > 1e-12 * hi) {
    double mid = lo + (hi - lo) / 2;
    if (auto packed = packUnderCap(pricer, layers, p, mid, in)) {
      hi = mid;
      best = std::move(packed);
    } else {
      lo = mid;
    }
  }
  return best;
}

// The min-max partition into exactly p stages by DP over stage positions, so
// that layer pins hold exactly.
std::optional<Ranges> pinnedPartition(const RangePricer& pricer, int layers, int p,
                                      const StageSearchInput& in) {
  // best[k][j]: the least largest latency of layers [0, j) in k stages.
  std::vector<std::vector<double>> best(p + 1, std::vector<double>(layers + 1, kInf));
  std::vector<std::vector<int>> cut(p + 1, std::vector<int>(layers + 1, -1));
  best[0][0] = 0;
  for (int k = 1; k <= p; ++k) {
    double held = std::min(p - (k - 1), in.microbatches);
    for (int j = k; j <= layers - (p - k); ++j)
      for (int i = k - 1; i < j; ++i) {
        if (best[k - 1][i] == kInf || !allowedByPins(i, j, k - 1, in.layerPins)) continue;
        StageEstimate e = pricer.estimate(i, j);
        if (!e.feasible || e.memory(held) > in.memoryBudget) continue;
        double value = std::max(best[k - 1][i], e.latency());
        if (value < best[k][j]) best[k][j] = value, cut[k][j] = i;
      }
  }
  if (best[p][layers] == kInf) return std::nullopt;
  Ranges ranges(p);
  for (int k = p, j = layers; k > 0; j = cut[k][j], --k) ranges[k - 1] = {cut[k][j], j};
  return ranges;
}

std::optional<Ranges> partition(const RangePricer& pricer, int layers, int p,
                                const StageSearchInput& in) {
  if (in.layerPins.empty()) return greedyPartition(pricer, layers, p, in);
  return pinnedPartition(pricer, layers, p, in);
}

}  // namespace

std::vector<StageSearchResult> uniformStages(const StageSearchInput& in, std::string* why) {
  const auto& configs = *in.configs;
  int layers = in.table->layerCount();
  std::int64_t devices = in.cluster->deviceCount();
  std::vector<StageSearchResult> found;
  Pricers pricers(in);
  for (int c = 0; c < int(configs.size()); ++c) {
    std::int64_t size = configs[c].shape.devices();
    if (!in.isUsable(c)) continue;
    if (devices % size != 0 || devices / size > layers) continue;
    int p = int(devices / size);
    if (in.stages && p != *in.stages) continue;
    for (int v = 0; v < int(in.variants.size()); ++v) {
      const RangePricer& pricer = pricers.get(c, v);
      auto ranges = partition(pricer, layers, p, in);
      if (!ranges) continue;
      std::vector<StageChoice> stages;
      for (auto [first, end] : *ranges)
        stages.push_back({first, end, c, in.variants[v], pricer.estimate(first, end)});
      found.push_back(resultOf(std::move(stages), in.microbatches));
    }
  }
  if (found.empty())
    *why = "no pipeline of equal stages fits: every split leaves some stage over the memory "
           "budget, or the pins and hints exclude them all";
  return found;
}

}  // namespace meshflow::passes
