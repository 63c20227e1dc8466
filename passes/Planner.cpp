#include "passes/Planner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <cstring>
#include <map>
#include <thread>

#include "ir/Counted.h"
#include "ir/OpCost.h"
#include "passes/Placement.h"
#include "passes/planner/Candidate.h"
#include "passes/planner/Exclusions.h"
#include "passes/planner/PlacedTransfers.h"
#include "passes/planner/PlanBuilder.h"
#include "passes/planner/RankMemory.h"
#include "passes/planner/RequestChecks.h"
#include "passes/planner/ScopeLayers.h"
#include "passes/planner/StepTime.h"

namespace meshflow::passes {
namespace {

constexpr int kDefaultLayers = 16;
// The search keeps this many candidates by its closed forms; placed, each is
// re-priced by replaying its schedule (planner/StepReplay.h), and the best
// kPlansBuilt of those become the plan and its alternatives.
constexpr std::size_t kCandidatesKept = 24;
constexpr std::size_t kPlansBuilt = 9;  // the plan and 8 alternatives
// A candidate whose closed-form peak passes 90% of the budget is checked
// against the peak its plan would report (the schedule replayed).
constexpr double kReplayShare = 0.9;
// The leanest search's stage searches after the first, each under a budget
// just below the splits the schedule check refused (searchLeanest).
constexpr int kTightenings = 8;
// The final choice simulates this many of the best estimates, while the sum
// of their simulationWork stays under the budget (GPT-1T on 3072 GPUs with 512
// microbatches, about 1.6 million, simulates in about a second).
constexpr std::size_t kSimulated = 4;
constexpr double kSimulationBudget = 2e6;
// Up to this many devices (Alpa's own testbed) every submesh shape is priced,
// sub-node ones included; beyond it only whole-node shapes that tile the
// cluster (MeshConfigLimits::uniformOnly, worthPricing).
constexpr std::int64_t kAlpaDpDevices = 64;
// Beyond it, Alpa's DP tries t_max caps 1% apart: within 1% of its optimum, at
// a few dozen DP runs instead of thousands.
constexpr double kLargeClusterTmaxGap = 0.01;

// "1.243 ms", or "48.32 s" from a second on.
std::string secondsText(double seconds) {
  return seconds >= 1 ? fmt::format("{:.4g} s", seconds) : fmt::format("{:.4g} ms", seconds * 1e3);
}

std::string pinText(const LayerPin& pin) {
  return fmt::format("pin(layers = {}..{}, stage = {})", pin.firstLayer, pin.endLayer, pin.stage);
}
std::string pinText(const DevicePin& pin) {
  return fmt::format("pin(stage = {}, devices = [{}])", pin.stage, fmt::join(pin.devices, ", "));
}
std::string pinText(const OpShardingPin& pin) {
  return fmt::format("pin(op = \"{}\", sharding = \"{}\")", pin.pattern, pin.spec);
}

// ---- the request ----

void checkPositive(const std::optional<int>& value, const char* hint) {
  if (value && *value < 1)
    throw PlanningError(hint, fmt::format("{} must be at least 1, not {}", hint, *value));
}

void validateRequest(const PlanRequest& r, const ir::Cluster& cluster) {
  if (r.globalBatch < 1)
    throw PlanningError("batch", fmt::format("batch must be at least 1, not {}", r.globalBatch));
  checkPositive(r.microbatches, "microbatches");
  checkPositive(r.virtualStages, "virtual_stages");
  checkPositive(r.stages, "stages");
  checkPositive(r.maxTensorParallel, "max_tensor_parallel");
  checkPositive(r.dataParallel, "data_parallel");
  if (r.microbatches && r.globalBatch % *r.microbatches != 0)
    throw PlanningError("microbatches",
                        fmt::format("microbatches = {} does not divide the batch of {} samples",
                                    *r.microbatches, r.globalBatch));
  if (r.stages && cluster.deviceCount() % *r.stages != 0)
    throw PlanningError("stages", fmt::format("stages = {} does not divide the cluster's {} devices "
                                              "into equal submeshes",
                                              *r.stages, cluster.deviceCount()));
  if (r.memoryPerDevice && *r.memoryPerDevice <= 0)
    throw PlanningError("memory_per_device", "memory_per_device must be positive");
  if (r.recompute && *r.recompute != "none" && *r.recompute != "selective" && *r.recompute != "full")
    throw PlanningError("recompute", fmt::format("recompute must be \"none\", \"selective\" or "
                                                 "\"full\", not \"{}\"",
                                                 *r.recompute));
  if (r.virtualStages && *r.virtualStages > 1 && r.schedule &&
      *r.schedule != ir::ScheduleKind::kInterleaved && *r.schedule != ir::ScheduleKind::kZeroBubbleV)
    throw PlanningError("virtual_stages",
                        fmt::format("virtual_stages = {} needs pipeline = \"interleaved\" or "
                                    "\"zbv\", not \"{}\"",
                                    *r.virtualStages, ir::scheduleKindName(*r.schedule)));
  if (r.virtualStages && *r.virtualStages != 2 && r.schedule == ir::ScheduleKind::kZeroBubbleV)
    throw PlanningError(
        "virtual_stages",
        fmt::format("virtual_stages = {}: zbv runs exactly 2 chunks per rank (one V: "
                    "rank r holds virtual stages r and 2p - 1 - r)",
                    *r.virtualStages));
}

int opsWithFlops(const ir::Graph& graph) {
  int count = 0;
  for (ir::OpId id = 0; id < graph.ops().size(); ++id)
    if (ir::opCost(graph, id, 1).flops > 0) ++count;
  return count;
}

}  // namespace

// The user's layer count, else the scope layers, else G(k, r) into at most
// kDefaultLayers layers (every layer needs an op with FLOPs).
LayerClustering planLayers(const ir::Graph& forward, int layers) {
  LayerClusteringOptions options;
  options.layers = layers;
  if (layers == 0) {
    if (auto scoped = scopeLayers(forward, 1)) return *scoped;
    options.layers = std::max(1, std::min(kDefaultLayers, opsWithFlops(forward)));
  }
  try {
    return clusterLayers(forward, options);
  } catch (const LayerClusteringError& e) {
    throw PlanningError("layers", e.what());
  }
}

std::vector<int> layerOfForwardOps(const ir::Graph& forward, const ir::Plan& plan) {
  if (plan.stages.empty()) throw PlanningError("stages", "the plan has no stages");
  const int count = plan.stages.back().endLayer;
  LayerClustering layers = planLayers(forward, 0);
  if (static_cast<int>(layers.layers.size()) != count) layers = planLayers(forward, count);
  return layers.layerOfOp;
}

std::vector<int> stageOfForwardOps(const ir::Graph& forward, const ir::Plan& plan) {
  const std::vector<int> layerOfOp = layerOfForwardOps(forward, plan);
  const int count = plan.stages.back().endLayer;
  std::vector<int> stageOfLayer(static_cast<std::size_t>(count), -1);
  for (std::size_t s = 0; s < plan.stages.size(); ++s)
    for (int l = plan.stages[s].firstLayer; l < plan.stages[s].endLayer && l < count; ++l)
      if (l >= 0) stageOfLayer[static_cast<std::size_t>(l)] = static_cast<int>(s);
  std::vector<int> stages(forward.ops().size(), 0);
  for (ir::OpId id = 0; id < forward.ops().size(); ++id) {
    int stage = stageOfLayer.at(static_cast<std::size_t>(layerOfOp[id]));
    if (stage < 0)
      throw PlanningError("stages", fmt::format("layer {} is in no stage of the plan", layerOfOp[id]));
    stages[id] = stage;
  }
  return stages;
}

namespace {

std::vector<IntraOpPin> intraOpPins(const PlanRequest& r) {
  std::vector<IntraOpPin> pins;
  for (const OpShardingPin& pin : r.opPins) {
    try {
      pins.push_back({pin.pattern, ir::ShardingSpec::parse(pin.spec)});
    } catch (const std::exception& e) {
      throw PlanningError(pinText(pin), fmt::format("{}: {}", pinText(pin), e.what()));
    }
  }
  return pins;
}

void checkLayerPins(const PlanRequest& r, int layers) {
  for (const LayerPin& pin : r.layerPins) {
    if (pin.firstLayer < 0 || pin.endLayer > layers || pin.firstLayer >= pin.endLayer)
      throw PlanningError(pinText(pin), fmt::format("{}: the model has layers 0..{}", pinText(pin),
                                                    layers));
    if (pin.stage < 0 || (r.stages && pin.stage >= *r.stages))
      throw PlanningError(pinText(pin), fmt::format("{}: no stage {}", pinText(pin), pin.stage));
  }
}

std::vector<int> microbatchCandidates(const PlanRequest& r) {
  if (r.microbatches) return {*r.microbatches};
  // Every divisor of the batch, as many microbatches of as many samples.
  std::vector<int> divisors;
  for (std::int64_t d = 1; d <= r.globalBatch && d <= (1 << 20); ++d)
    if (r.globalBatch % d == 0) divisors.push_back(int(d));
  return divisors;
}

std::vector<StageVariant> variants(const PlanRequest& r) {
  std::vector<Recompute> modes = {Recompute::kNone, Recompute::kFull};
  if (r.recompute)
    modes = {*r.recompute == "full"        ? Recompute::kFull
             : *r.recompute == "selective" ? Recompute::kSelective
                                           : Recompute::kNone};
  std::vector<StageVariant> out;
  std::vector<bool> zero = {false, true};
  if (r.shardOptimizerState) zero = {*r.shardOptimizerState};
  for (bool lean : {false, true})
    for (bool z : zero)
      for (Recompute m : modes) out.push_back({m, z, lean});
  return out;
}

// ---- schedules ----

struct ScheduleChoice {
  ir::ScheduleKind kind;
  int chunks;
};

std::vector<ScheduleChoice> scheduleCandidates(const PlanRequest& r) {
  if (r.schedule) {
    int chunks = 1;
    if (*r.schedule == ir::ScheduleKind::kInterleaved) chunks = r.virtualStages.value_or(2);
    if (*r.schedule == ir::ScheduleKind::kZeroBubbleV) chunks = 2;  // one V: two chunks per rank
    return {{*r.schedule, chunks}};
  }
  std::vector<ScheduleChoice> out = {{ir::ScheduleKind::kOneFOneB, 1},
                                     {ir::ScheduleKind::kZeroBubbleH1, 1}};
  // Interleaved with the chunks asked for, else 2 and 4 (Llama 3's 405B plan
  // needs 4: with as many microbatches as ranks, the bubble is the pipeline).
  if (r.virtualStages) {
    out.push_back({ir::ScheduleKind::kInterleaved, std::max(*r.virtualStages, 2)});
  } else {
    out.push_back({ir::ScheduleKind::kInterleaved, 2});
    out.push_back({ir::ScheduleKind::kInterleaved, 4});
  }
  out.push_back({ir::ScheduleKind::kGPipe, 1});
  return out;
}

// The pipeline ranks of `stages` under a schedule with `chunks` chunks per rank:
// each rank's layers cut into `chunks` virtual stages in Megatron's order
// (virtual stage c·p + r is chunk c of rank r). Nothing when the stages cannot
// be cut that way (unequal meshes, too few layers).
// A schedule the stages cannot take: the hint at fault and why.
struct ScheduleRefusal {
  std::string hint;
  std::string why;
  /// The smallest peak per device of the plans the stage search found that
  /// the memory budget refused under their schedule, and that plan.
  double smallestPeak = std::numeric_limits<double>::infinity();
  std::string leanest;
  /// The largest memory the stage search held a plan the budget refused to
  /// (its closed form: StageEstimate::memory(held) at 1F1B's holding).
  double largestSearched = 0;

  void refuse(std::string atHint, std::string reason) {
    hint = std::move(atHint);
    why = std::move(reason);
  }
};

// The largest memory the stage search held a stage of `found` to: its closed
// form with 1F1B's holding, stage k of p holding min(p − k, B) microbatches.
double searchedMemory(const StageSearchResult& found, int microbatches) {
  const int p = int(found.stages.size());
  double largest = 0;
  for (int k = 0; k < p; ++k)
    largest =
        std::max(largest, found.stages[k].estimate.memory(double(std::min(p - k, microbatches))));
  return largest;
}

std::optional<Candidate> withSchedule(const StageSearchResult& found, ScheduleChoice schedule,
                                      int microbatches, const StageSearchInput& in, ScheduleRefusal& refusal) {
  Candidate c;
  c.microbatches = microbatches;
  c.microbatch = in.microbatch;
  c.schedule = schedule.kind;
  c.chunks = schedule.chunks;
  int p = int(found.stages.size());
  if (schedule.chunks == 1) {
    c.stages = found.stages;
  } else {
    const StageChoice& first = found.stages.front();
    for (const StageChoice& s : found.stages)
      if (s.config != first.config || s.variant.recompute != first.variant.recompute ||
          s.variant.zero != first.variant.zero || s.variant.lean != first.variant.lean)
        return {};
    int layers = found.stages.back().endLayer;
    int virtualStages = p * schedule.chunks;
    if (layers < virtualStages) {
      refusal.refuse(
          "virtual_stages",
          fmt::format("{} pipeline rank{} × {} chunks need at least {} layers; the model has {}", p,
                      p == 1 ? "" : "s", schedule.chunks, virtualStages, layers));
      return {};
    }
    if (schedule.kind == ir::ScheduleKind::kInterleaved && microbatches % p != 0) {
      refusal.refuse("microbatches",
                     fmt::format("the interleaved schedule needs microbatches divisible by the {} "
                                 "pipeline ranks, not {}",
                                 p, microbatches));
      return {};
    }
    RangePricer pricer(*in.table, first.config, (*in.configs)[first.config], in.microbatch,
                       1.0 / microbatches, first.variant, *in.cluster);
    for (int k = 0; k < virtualStages; ++k) {
      int a = int(std::int64_t(layers) * k / virtualStages);
      int b = int(std::int64_t(layers) * (k + 1) / virtualStages);
      StageEstimate e = pricer.estimate(a, b);
      if (!e.feasible) return {};
      c.stages.push_back({a, b, first.config, first.variant, e});
    }
  }
  sumRanks(c, p);
  double closest = 0, gradients = 0;
  for (int r = 0; r < p; ++r) {
    closest = std::max(
        closest, c.ranks[r].memory(holdingOf(schedule.kind, schedule.chunks, p, r, microbatches)));
    gradients = std::max(gradients, c.ranks[r].accumulatedGradients);
  }
  // Near the budget, the peak the plan will report (the schedule replayed,
  // RankMemory.h) decides: it may exceed the closed form by a layer's
  // gradients, so "near" is within 10% or within the rank's gradients.
  auto reported = [&] {
    double peak = closest;
    for (double rank : candidatePeaks(c, *in.table, *in.configs, *in.cluster))
      peak = std::max(peak, rank);
    return peak;
  };
  const bool near =
      closest > kReplayShare * in.memoryBudget || closest + gradients > in.memoryBudget;
  if (closest <= in.memoryBudget && near) closest = reported();
  if (closest > in.memoryBudget) {
    // The refusal names the leanest such plan with the figure the check held
    // against it: the larger of the closed form and the replayed peak.
    const double peak = closest < refusal.smallestPeak ? reported() : closest;
    if (peak < refusal.smallestPeak) {
      refusal.smallestPeak = peak;
      refusal.leanest = c.describe(*in.configs);
    }
    refusal.largestSearched =
        std::max(refusal.largestSearched, searchedMemory(found, microbatches));
    return {};
  }
  return c;
}

// ---- the search ----

std::string withoutVariantMarks(std::string text) {
  for (const char* mark : {" zero", " lean"})
    for (std::size_t at; (at = text.find(mark)) != std::string::npos;)
      text.erase(at, std::strlen(mark));
  return text;
}

class Search {
 public:
  Search(const ir::Graph& forward, const ir::Cluster& cluster, const PlanRequest& request)
      : forward_(forward),
        physical_(cluster),
        usable_(usableDevices(cluster, request)),
        cluster_(usable_.cluster),
        request_(request) {}

  ir::Plan run() {
    checkpoint(request_.control);
    validateRequest(request_, cluster_);
    checkOpPinsMatch(request_, forward_);
    {
      PlanControl::Pass pass(request_.control, "layer clustering");
      layers_ = planLayers(forward_, request_.layers);
    }
    checkStagesFitLayers(request_, int(layers_.layers.size()));
    checkLayerPins(request_, int(layers_.layers.size()));
    budget_ = request_.memoryPerDevice.value_or(cluster_.device.memoryBytes);
    table_.emplace(forward_, layers_, cluster_.device,
                   LayerCostOptions{request_.optimizerCopies, intraOpPins(request_), budget_,
                                    cluster_.deviceCount(), request_.control});
    configs_ = meshConfigs(cluster_, limits());
    if (configs_.empty()) throw noConfigs();
    searchAll();
    // Nothing fits: search again with layers leaner for the microbatches a
    // stage holds at once (LayerCostTable::countMicrobatchesInFlight).
    if (candidates_.empty() && table_->countMicrobatchesInFlight()) searchAll();
    if (candidates_.empty() && table_->priceLeanest()) searchLeanest();
    if (candidates_.empty()) throw nothingFits();
    PlanControl::Pass pass(request_.control, "placement and simulation");
    return finish(candidates_.front());
  }

 private:
  MeshConfigLimits limits() const {
    MeshConfigLimits l;
    l.maxTensorParallel = request_.maxTensorParallel;
    l.dataParallel = request_.dataParallel;
    if (request_.stages) l.stageDevices = int(cluster_.deviceCount() / *request_.stages);
    l.uniformOnly = cluster_.deviceCount() > kAlpaDpDevices;
    return l;
  }

  // The last search, with the leanest strategies (LayerCostTable::priceLeanest),
  // which do not depend on the budget: the other searches price memory at the
  // layer's share of it, so they get less lean as it grows, and a budget could
  // lose a plan a smaller one found. The stage search bounds a stage's memory
  // by a closed form that the replayed peak may exceed, and picks the fastest
  // split under it: a split the schedule check refuses hides the leaner ones a
  // smaller budget's stage search would pick. So while the check refuses
  // splits for memory, the stage search runs again under a budget just below
  // the largest closed form of those (at most kTightenings times).
  void searchLeanest() {
    double stageBudget = budget_;
    std::string why;  // a refusal names the stage search under budget_, not a cut one
    for (int round = 0; round <= kTightenings && candidates_.empty(); ++round) {
      scheduleRefusal_.largestSearched = 0;
      searchAll(stageBudget);
      if (round == 0) why = lastWhy_;
      const double refused = scheduleRefusal_.largestSearched;
      if (refused <= 0) break;
      stageBudget = std::nextafter(std::min(stageBudget, refused), 0.0);
    }
    lastWhy_ = why;
  }

  // `stageBudget`: the memory budget the stage search splits under (the
  // schedule check holds the plans to budget_ whatever it is).
  void searchAll() { searchAll(budget_); }
  void searchAll(double stageBudget) {
    for (int microbatches : microbatchCandidates(request_)) {
      StageSearchInput in;
      in.table = &*table_;
      in.configs = &configs_;
      in.cluster = &cluster_;
      in.variants = variants(request_);
      in.microbatch = request_.globalBatch / microbatches;
      in.microbatches = microbatches;
      in.memoryBudget = stageBudget;
      in.layerPins = request_.layerPins;
      in.stages = request_.stages;
      in.control = request_.control;
      if (cluster_.deviceCount() > kAlpaDpDevices) in.tmaxGap = kLargeClusterTmaxGap;
      // Data-parallel rows split the microbatch's samples: a view's rows must
      // divide it, and each row gets a power of two of them (Megatron's
      // microbatch sizes 1, 2, 4 …), which keeps the intra-op solves few.
      for (const MeshConfig& c : configs_) {
        std::int64_t perRow = in.microbatch / c.view[0];
        in.usable.push_back(in.microbatch % c.view[0] == 0 && (perRow & (perRow - 1)) == 0 &&
                            worthPricing(c));
        anyMeshTakesBatch_ = anyMeshTakesBatch_ || (in.usable.back() && tiles(c));
      }
      prefetch(in);
      PlanControl::Pass pass(request_.control, "stage search");
      StageSearchInput check = in;
      check.memoryBudget = budget_;
      for (auto& [result, search] : stageResults(in))
        for (ScheduleChoice schedule : scheduleCandidates(request_)) {
          checkpoint(request_.control, 1);
          // One rank cut into chunks runs as 1F1B does, in more pieces: only on request.
          if (schedule.chunks > 1 && result.stages.size() == 1 && !request_.schedule) continue;
          if (auto c = withSchedule(result, schedule, microbatches, check, scheduleRefusal_)) {
            c->search = search;
            ++searched_;
            keep(std::move(*c));
          }
        }
    }
  }

  // Keeps the best kCandidatesKept candidates by step time, distinct by their
  // description; among equal times the first found stays first.
  // A variant that changes nothing (ZeRO or lean strategies where memory does
  // not bind) ties with the plain candidate found before it: only the plain one
  // is kept.
  void keep(Candidate c) {
    // No slower than the last of a full list: it would land past the end.
    if (candidates_.size() >= kCandidatesKept && c.stepTime >= candidates_.back().stepTime) return;
    std::string text = c.describe(configs_);
    std::string plain = withoutVariantMarks(text);
    for (auto it = candidates_.begin(); it != candidates_.end(); ++it) {
      std::string other = it->describe(configs_);
      if (it->stepTime == c.stepTime && withoutVariantMarks(other) == plain) return;
      if (other != text) continue;
      if (it->stepTime <= c.stepTime) return;
      candidates_.erase(it);
      break;
    }
    auto at = std::upper_bound(candidates_.begin(), candidates_.end(), c.stepTime,
                               [](double t, const Candidate& k) { return t < k.stepTime; });
    if (at - candidates_.begin() >= std::ptrdiff_t(kCandidatesKept)) return;
    candidates_.insert(at, std::move(c));
    if (candidates_.size() > kCandidatesKept) candidates_.pop_back();
  }

  // Whether stages of submesh `c` can cover the cluster, one layer each at
  // least (Alpa's DP combines unequal submeshes below kAlpaDpDevices).
  bool tiles(const MeshConfig& c) const {
    std::int64_t devices = cluster_.deviceCount(), size = c.shape.devices();
    return devices <= kAlpaDpDevices || (devices % size == 0 && devices / size <= table_->layerCount());
  }

  // Beyond Alpa's scale a submesh is worth pricing only if the cluster holds a
  // whole number of them and no more stages than layers: the intra-op solves
  // of every other shape would cost more than the plans they could add.
  bool worthPricing(const MeshConfig& c) const {
    std::int64_t devices = cluster_.deviceCount(), size = c.shape.devices();
    return devices <= kAlpaDpDevices ||
           (devices % size == 0 && devices / size <= table_->layerCount());
  }

  // Solves every layer kind on every configuration the searches will price, in
  // parallel, before they ask one at a time.
  void prefetch(const StageSearchInput& in) {
    PlanControl::Pass pass(request_.control, "layer costs");
    std::vector<LayerCostTable::Request> requests;
    std::vector<int> firstOfKind(table_->kindCount(), -1);
    for (int l = 0; l < table_->layerCount(); ++l)
      if (firstOfKind[table_->kindOf(l)] < 0) firstOfKind[table_->kindOf(l)] = l;
    for (int c = 0; c < int(configs_.size()); ++c) {
      if (!in.isUsable(c)) continue;
      for (int layer : firstOfKind)
        for (bool lean : {false, true})
          requests.push_back({layer, c, &configs_[c], in.microbatch, 1.0 / in.microbatches, lean});
    }
    table_->prefetch(requests, std::max(1u, std::thread::hardware_concurrency()));
  }

  std::vector<std::pair<StageSearchResult, std::string>> stageResults(const StageSearchInput& in) {
    std::vector<std::pair<StageSearchResult, std::string>> out;
    std::string why;
    if (auto r = alpaStages(in, &why); r && honoursLayerPins(r->stages, in.layerPins))
      out.push_back({std::move(*r), "alpa"});
    for (StageSearchResult& r : uniformStages(in, &why)) out.push_back({std::move(r), "uniform"});
    if (out.empty()) lastWhy_ = why;
    return out;
  }

  // Places the stages on the nodes no exclusion touches (usable_.cluster, whose
  // ids the pins are translated to) and maps the ids back to physical ones.
  std::vector<std::vector<int>> place(const Candidate& c) const {
    PlacementRequest placement;
    for (std::size_t r = 0; r < c.ranks.size(); ++r)
      placement.stages.push_back(configs_[c.stages[r].config].shape);
    for (const DevicePin& pin : request_.devicePins) {
      placement.pins.push_back({pin.stage, {}});
      for (int d : pin.devices) placement.pins.back().devices.push_back(*usable_.planning(d));
    }
    Placement placed;
    try {
      placed = placeStages(cluster_, placement);
    } catch (const PlacementError& e) {
      throw placementFailed(c, placement, e.what());
    }
    for (std::vector<int>& ids : placed.devices)
      for (int& d : ids) d = usable_.physical(d);
    return placed.devices;
  }

  // A candidate placed, its transfers priced on the links its devices use
  // and its step replayed, then built into a plan.
  struct Finalist {
    Candidate candidate;
    std::vector<std::vector<int>> devices;
    ir::Plan plan;
    double simulated = 0;
  };

  Finalist placed(Candidate c) {
    std::vector<std::vector<int>> devices = place(c);
    priceTransfersOnDevices(c, devices, configs_, physical_);
    return {std::move(c), std::move(devices), {}, 0};
  }

  // The search ranks candidates by its closed forms. The ones it kept are
  // placed and re-priced on the links their devices use (the best must place;
  // one the pins cannot place is no alternative), and the best kPlansBuilt by
  // the re-priced step are built into plans; the best few of those are
  // simulated when a simulator is given (while their programs stay small
  // enough to simulate in about a second each), and the fastest is the plan.
  // Without one, the best re-priced step is.
  ir::Plan finish(const Candidate& best) {
    std::vector<Finalist> finalists;
    finalists.push_back(placed(best));
    for (std::size_t k = 1; k < candidates_.size(); ++k) {
      try {
        finalists.push_back(placed(candidates_[k]));
      } catch (const PlanningError&) {
      }
    }
    // Among steps equal to a billionth, a pipeline whose ranks all have as
    // many data-parallel rows comes first: lowering runs it as replicas and
    // the exports can express it.
    auto key = [&](const Finalist& f) {
      return f.candidate.stepTime * (sameRows(f.candidate) ? 1 : 1 + 1e-9);
    };
    std::stable_sort(finalists.begin(), finalists.end(),
                     [&](const Finalist& a, const Finalist& b) { return key(a) < key(b); });
    if (finalists.size() > kPlansBuilt) finalists.resize(kPlansBuilt);
    PlanInputs in{&forward_, &cluster_, &layers_, &*table_, &configs_, request_.globalBatch,
                  budget_};
    for (Finalist& f : finalists) f.plan = buildPlan(in, f.candidate, f.devices);
    std::size_t simulated = 0;
    double work = 0;
    for (Finalist& f : finalists) {
      checkpoint(request_.control);
      work += simulationWork(f.candidate);
      if (!request_.simulateStep || simulated == kSimulated || work > kSimulationBudget) break;
      f.simulated = request_.simulateStep(f.plan, physical_);
      ++simulated;
    }
    std::size_t chosen = 0;
    for (std::size_t k = 1; k < simulated; ++k)
      if (finalists[k].simulated < finalists[chosen].simulated) chosen = k;
    ir::Plan plan = std::move(finalists[chosen].plan);
    if (usable_.restricted()) plan.notes.push_back(exclusionNote(physical_, usable_));
    if (physical_.device.fusedKernels)
      plan.notes.push_back(
          "priced with fused attention (FlashAttention), RMSNorm and SwiGLU kernels "
          "(fused_kernels = true); meshflow's runtimes fuse the attention and run RMSNorm and SwiGLU op by op, "
          "holding more");
    plan.notes.push_back(fmt::format(
        "searched {} candidate plans over {} meshes; {} intra-op solves of {} distinct layers",
        searched_, configs_.size(), table_->solves(), table_->kindCount()));
    if (simulated > 1) plan.notes.push_back(choiceNote(finalists, simulated, chosen));
    plan.simulatedStepTime = finalists[chosen].simulated;
    for (std::size_t k = 0; k < finalists.size(); ++k)
      if (k != chosen) {
        finalists[k].plan.simulatedStepTime = finalists[k].simulated;
        plan.alternatives.push_back(
            {finalists[k].candidate.describe(configs_), finalists[k].candidate.stepTime,
             std::make_shared<const ir::Plan>(std::move(finalists[k].plan))});
      }
    return plan;
  }

  bool sameRows(const Candidate& c) const {
    return std::all_of(c.stages.begin(), c.stages.end(), [&](const StageChoice& s) {
      return configs_[s.config].view[0] == configs_[c.stages[0].config].view[0];
    });
  }

  // Instructions a simulation of `c` runs, about: every device's share of
  // every microbatch through every chunk.
  double simulationWork(const Candidate& c) const {
    double devices = 0;
    for (std::size_t r = 0; r < c.ranks.size(); ++r)
      devices += double(configs_[c.stages[r].config].shape.devices());
    return devices * c.microbatches * c.chunks;
  }

  std::string choiceNote(const std::vector<Finalist>& finalists, std::size_t simulated,
                         std::size_t chosen) const {
    std::string figures;
    for (std::size_t k = 0; k < simulated; ++k)
      figures += fmt::format("{}{}{} (estimated {})", k ? ", " : "", k == chosen ? "*" : "",
                             secondsText(finalists[k].simulated),
                             secondsText(finalists[k].candidate.stepTime));
    return fmt::format("chosen by simulation among the {} best estimates: {}", simulated, figures);
  }

  // The hint is the first device pin the placement error names; the error
  // names pins by the planning cluster's ids, given back as the user wrote them.
  PlanningError placementFailed(const Candidate& best, const PlacementRequest& placement,
                                std::string message) const {
    std::string hint;
    for (std::size_t i = 0; i < request_.devicePins.size(); ++i) {
      const DevicePin& pin = request_.devicePins[i];
      std::string named = fmt::format("pin of stage {} on devices [{}]", pin.stage,
                                      fmt::join(placement.pins[i].devices, ", "));
      std::size_t at = message.find(named);
      if (at == std::string::npos) continue;
      message.replace(at, named.size(), fmt::format("pin of stage {} on devices [{}]", pin.stage,
                                                    fmt::join(pin.devices, ", ")));
      if (hint.empty()) hint = fmt::format("pin(stage = {}, devices = ...)", pin.stage);
    }
    if (hint.empty())
      for (const DevicePin& pin : request_.devicePins)
        if (hint.empty() && message.find(fmt::format("pin of stage {}", pin.stage)) != std::string::npos)
          hint = fmt::format("pin(stage = {}, devices = ...)", pin.stage);
    return PlanningError(hint, fmt::format("placing the {} of the best plan: {}",
                                           ir::counted(std::int64_t(best.ranks.size()), "stage"), message));
  }

  PlanningError noConfigs() const {
    std::string hint = request_.dataParallel        ? "data_parallel"
                       : request_.maxTensorParallel ? "max_tensor_parallel"
                                                    : "stages";
    return PlanningError(hint, fmt::format("no submesh of the {}x{} cluster has a logical mesh "
                                           "that meets the hints (stages, data_parallel, "
                                           "max_tensor_parallel)",
                                           cluster_.nodes, cluster_.devicesPerNode));
  }

  PlanningError nothingFits() const {
    if (!request_.opPins.empty()) {
      PlanRequest unpinned = withoutSimulation();
      unpinned.opPins.clear();
      if (fits(unpinned)) {
        std::string pins;
        for (const OpShardingPin& pin : request_.opPins)
          pins += (pins.empty() ? "" : "; ") + pinText(pin);
        return PlanningError(pinText(request_.opPins.front()),
                             fmt::format("no plan honours {}: no strategy of the ops it matches "
                                         "produces that spec on any mesh that fits (plans without "
                                         "it exist)",
                                         pins));
      }
    }
    if (!request_.layerPins.empty()) {
      PlanRequest unpinned = withoutSimulation();
      unpinned.layerPins.clear();
      if (fits(unpinned)) {
        std::string pins;
        for (const LayerPin& pin : request_.layerPins) pins += (pins.empty() ? "" : "; ") + pinText(pin);
        return PlanningError(pinText(request_.layerPins.front()),
                             fmt::format("no plan honours {} (plans without it exist): {}", pins,
                                         lastWhy_));
      }
    }
    if (!request_.layerPins.empty() && !request_.devicePins.empty()) {
      PlanRequest unpinned = withoutSimulation();
      unpinned.layerPins.clear();
      unpinned.devicePins.clear();
      if (fits(unpinned)) {
        std::string pins;
        for (const LayerPin& pin : request_.layerPins) pins += (pins.empty() ? "" : "; ") + pinText(pin);
        for (const DevicePin& pin : request_.devicePins) pins += "; " + pinText(pin);
        // `...`: the block may have written the layer pin with its devices.
        const LayerPin& first = request_.layerPins.front();
        return PlanningError(fmt::format("pin(layers = {}..{}, stage = {}...)", first.firstLayer, first.endLayer,
                                         first.stage),
                             fmt::format("no plan honours {} together (plans without them exist; pinned "
                                         "layers are searched on equal submeshes only, docs/planning.md): {}",
                                         pins, lastWhy_));
      }
    }
    // No submesh both covers the cluster in at most one stage per layer and
    // splits a microbatch over its data-parallel rows: the batch is too small
    // for the cluster, whatever the memory.
    if (!anyMeshTakesBatch_)
      return PlanningError("batch", batchTooSmall());
    // Stages fit, but the schedule asked for could not run on any of them.
    if (lastWhy_.empty() && !scheduleRefusal_.why.empty())
      return PlanningError(scheduleRefusal_.hint, "no plan takes the schedule: " + scheduleRefusal_.why);
    std::string limit = request_.memoryPerDevice
                            ? fmt::format("memory_per_device <= {}", ir::formatBytes(budget_))
                            : fmt::format("the device's {}", ir::formatBytes(budget_));
    std::string why = lastWhy_.empty() ? smallestPeakText() : lastWhy_;
    if (request_.recompute && *request_.recompute != "full") {
      PlanRequest full = withoutSimulation();
      full.recompute = "full";
      if (fits(full))
        return PlanningError("recompute",
                             fmt::format("no plan fits in {} per device with recompute = \"{}\" "
                                         "({}, batch {}): {}; with recompute = \"full\" "
                                         "plans fit",
                                         limit, *request_.recompute,
                                         ir::counted(std::int64_t(layers_.layers.size()), "layer"),
                                         request_.globalBatch, why));
    }
    return PlanningError("memory_per_device",
                         fmt::format("no plan fits in {} per device, {} ({}, batch {}): {}",
                                     limit, triedText(),
                                     ir::counted(std::int64_t(layers_.layers.size()), "layer"),
                                     request_.globalBatch, why));
  }

  // What the search tried to save memory: "even with recomputation and
  // sharded optimizer state", or what the hints allowed.
  std::string triedText() const {
    const bool recompute = !request_.recompute || *request_.recompute == "full";
    const bool zero = request_.shardOptimizerState.value_or(true);
    if (recompute && zero) return "even with recomputation and sharded optimizer state";
    std::string text = recompute ? "even with recomputation"
                                 : fmt::format("with recompute = \"{}\"", *request_.recompute);
    return text + (zero ? " and sharded optimizer state" : ", optimizer state not sharded");
  }

  // Why a batch of B samples cannot fill the cluster.
  std::string batchTooSmall() const {
    const std::int64_t devices = cluster_.deviceCount(), layers = table_->layerCount();
    const std::int64_t perStage = (devices + layers - 1) / layers;
    return fmt::format(
        "the batch of {} samples cannot fill the cluster's {} devices: a stage holds one layer "
        "at least, so each of at most {} stages spans {} devices or more, and each data-parallel "
        "row of a stage takes a power of two of a microbatch's samples; plan with a larger "
        "batch, or on fewer devices (a smaller cluster, or exclude = ...)",
        request_.globalBatch, devices, layers, perStage);
  }

  // "the leanest plan the stage search found needs 86.7 GiB per device (1f1b,
  // ...)", or why none was priced. The stage search drops splits whose stages
  // its own closed form puts over the budget; what it finds is then checked
  // under the schedule (withSchedule), and these are the plans that check refused.
  std::string smallestPeakText() const {
    if (!std::isfinite(scheduleRefusal_.smallestPeak))
      return "no stage split of the layers could be priced";
    return fmt::format("the leanest plan the stage search found needs {} per device ({})",
                       ir::formatBytes(scheduleRefusal_.smallestPeak), scheduleRefusal_.leanest);
  }

  // The request for a feasibility check, which needs no final choice.
  PlanRequest withoutSimulation() const {
    PlanRequest r = request_;
    r.simulateStep = nullptr;
    return r;
  }

  bool fits(const PlanRequest& request) const {
    try {
      Search(forward_, cluster_, request).run();
      return true;
    } catch (const PlanningError&) {
      return false;
    }
  }

  const ir::Graph& forward_;
  const ir::Cluster& physical_;
  const UsableDevices usable_;
  const ir::Cluster& cluster_;  // the nodes no exclusion touches, renumbered (usable_.cluster)
  const PlanRequest& request_;
  LayerClustering layers_;
  double budget_ = 0;
  std::optional<LayerCostTable> table_;
  std::vector<MeshConfig> configs_;
  std::vector<Candidate> candidates_;
  std::string lastWhy_;
  bool anyMeshTakesBatch_ = false;  // some usable submesh covers the cluster (tiles)
  ScheduleRefusal scheduleRefusal_;  // the last schedule the stages found could not take
  std::size_t searched_ = 0;
};

}  // namespace

ir::Plan planTraining(const ir::Graph& forward, const ir::Cluster& cluster,
                      const PlanRequest& request) {
  PlanControl* control = request.control;
  if (!control) return Search(forward, cluster, request).run();
  control->begin();
  // The run ends however the search does (a progress line is cleared).
  struct EndRun {
    PlanControl* control;
    ~EndRun() { control->end(); }
  } endRun{control};
  return Search(forward, cluster, request).run();
}

}  // namespace meshflow::passes
