#include "passes/StageSolver.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

namespace meshflow::passes {

StageProblem StageProblem::make(int layers, int microbatches, int nodes, int devicesPerNode,
                                std::vector<SubmeshShape> submeshes, int configs) {
  StageProblem p;
  p.layers = layers;
  p.microbatches = microbatches;
  p.nodes = nodes;
  p.devicesPerNode = devicesPerNode;
  p.submeshes = std::move(submeshes);
  p.configs = configs;
  p.cost.assign(p.tableSize(), kInfeasible);
  return p;
}

namespace {

constexpr double kInf = StageProblem::kInfeasible;

// The DP table has Q·(L+1)·(D+1) entries; past this it would not fit in memory
// on an ordinary machine, and the caller should coarsen the problem instead.
constexpr std::size_t kMaxDpEntries = std::size_t{1} << 27;

std::string shapeString(SubmeshShape shape) {
  return fmt::format("({}, {})", shape.nodes, shape.devicesPerNode);
}

void validateDimensions(const StageProblem& p) {
  if (p.layers < 1) throw StageError(fmt::format("layers: expected at least 1, got {}", p.layers));
  if (p.microbatches < 1)
    throw StageError(fmt::format("microbatches: expected at least 1, got {}", p.microbatches));
  if (p.nodes < 1 || p.devicesPerNode < 1)
    throw StageError(
        fmt::format("cluster: expected positive [N, M], got [{}, {}]", p.nodes, p.devicesPerNode));
  // The device dimension of the DP and the coin-change check are arrays over
  // device counts, so the count itself must stay an array size.
  if (static_cast<long long>(p.nodes) * p.devicesPerNode > (1 << 24))
    throw StageError(fmt::format("cluster: {}x{} devices is more than the 2^24 supported", p.nodes,
                                 p.devicesPerNode));
  if (p.submeshes.empty()) throw StageError("submeshes: expected at least one submesh shape");
  if (p.configs < 1)
    throw StageError(fmt::format("configs: expected at least 1, got {}", p.configs));
  if (p.cost.size() != p.tableSize())
    throw StageError(
        fmt::format("cost: expected {} entries (L·L·S·G), got {}", p.tableSize(), p.cost.size()));
  if (!p.maxSuccStages.empty() && p.maxSuccStages.size() != p.tableSize())
    throw StageError(fmt::format("max_n_succ_stages: expected {} entries (L·L·S·G), got {}",
                                 p.tableSize(), p.maxSuccStages.size()));
}

// A shape either stays inside one node or takes whole nodes. Shapes like (2, 2)
// would need the DP to track which devices of which nodes are free, not just how
// many; Alpa excludes them for the same reason.
void validateShape(const StageProblem& p, int s) {
  SubmeshShape shape = p.submeshes[s];
  auto fail = [&](const std::string& why) {
    throw StageError(fmt::format("submeshes[{}]: {} {}", s, shapeString(shape), why));
  };
  if (shape.nodes < 1 || shape.devicesPerNode < 1) fail("must have positive sizes");
  if (shape.nodes > p.nodes || shape.devicesPerNode > p.devicesPerNode)
    fail(fmt::format("does not fit in the {}x{} cluster", p.nodes, p.devicesPerNode));
  if (shape.nodes > 1 && shape.devicesPerNode != p.devicesPerNode)
    fail("spans nodes without taking whole nodes (use (n, M))");
  if (p.devicesPerNode % shape.devicesPerNode != 0)
    fail(fmt::format("does not divide a node of {} devices", p.devicesPerNode));
}

// Sub-node sizes that each divide the next pack into whole nodes whenever their
// sum is a multiple of M (place the largest first: every gap left is a multiple
// of the next size), so counting devices is exact. That covers Alpa's shapes
// (1, 1), (1, 2), (1, 4) … (1, M); for other sets counting is not known to be
// exact, so they are refused rather than silently mis-planned.
void validateDivisibilityChain(const StageProblem& p) {
  for (std::size_t a = 0; a < p.submeshes.size(); ++a) {
    for (std::size_t b = 0; b < p.submeshes.size(); ++b) {
      int x = p.submeshes[a].devices(), y = p.submeshes[b].devices();
      if (p.submeshes[a].nodes == 1 && p.submeshes[b].nodes == 1 && x < y && y % x != 0) {
        throw StageError(fmt::format(
            "submeshes[{}] and submeshes[{}]: sizes {} and {} do not divide one another, so "
            "counting devices would not guarantee the submeshes tile the nodes",
            a, b, x, y));
      }
    }
  }
}

void validateEntries(const StageProblem& p) {
  int numSubmeshes = static_cast<int>(p.submeshes.size());
  for (int i = 0; i < p.layers; ++i)
    for (int j = i; j < p.layers; ++j)
      for (int s = 0; s < numSubmeshes; ++s)
        for (int g = 0; g < p.configs; ++g) {
          double c = p.at(i, j, s, g);
          if (std::isnan(c) || c < 0)
            throw StageError(fmt::format("cost[{}][{}][{}][{}]: expected a latency >= 0, got {}", i,
                                         j, s, g, c));
        }
}

}  // namespace

void validateStageProblem(const StageProblem& problem) {
  validateDimensions(problem);
  for (int s = 0; s < static_cast<int>(problem.submeshes.size()); ++s) validateShape(problem, s);
  validateDivisibilityChain(problem);
  validateEntries(problem);
}

namespace {

// A plan found by one DP pass.
struct Candidate {
  double cost = kInf;
  double latencySum = 0;
  double maxLatency = 0;
  std::vector<Stage> stages;
};

// The problem in the DP's own units. Devices are counted in units of the gcd of
// all submesh sizes: with whole-node submeshes only, a 384×8 cluster is 384
// units rather than 3072 devices.
struct DpShape {
  int layers = 0;
  int numSubmeshes = 0;
  int configs = 0;
  int deviceUnits = 0;            // D in units
  std::vector<int> submeshUnits;  // per submesh
  // The stage-count dimension. Index q < Q−1 means exactly q stages; Q−1 means
  // "at least Q−1", which is exact enough because Q−1 exceeds every finite
  // max_n_succ_stages, so all such counts allow the same stages.
  int stageCounts = 1;
};

DpShape makeDpShape(const StageProblem& p, bool honourLimits) {
  DpShape shape;
  shape.layers = p.layers;
  shape.numSubmeshes = static_cast<int>(p.submeshes.size());
  shape.configs = p.configs;
  int devices = p.nodes * p.devicesPerNode;
  int unit = devices;
  for (SubmeshShape s : p.submeshes) unit = std::gcd(unit, s.devices());
  shape.deviceUnits = devices / unit;
  for (SubmeshShape s : p.submeshes) shape.submeshUnits.push_back(s.devices() / unit);
  int maxFiniteLimit = -1;
  // A stage never has more than L − 1 successors, so larger limits never bind
  // and need no stage-count dimension.
  if (honourLimits)
    for (int k : p.maxSuccStages)
      if (k < p.layers - 1) maxFiniteLimit = std::max(maxFiniteLimit, k);
  shape.stageCounts = std::min(p.layers + 1, maxFiniteLimit + 2);
  return shape;
}

// One table F[q][i][d]: the least Σ latency of stages holding layers i..L−1
// with q stages (bucketed, see DpShape) on d device units, every stage's
// latency at most the cap. Rows track the range of finite d so the inner loop
// skips the infinite tails, which dominate when few devices per layer remain.
class StageDp {
 public:
  StageDp(const StageProblem& problem, bool honourLimits)
      : p_(problem), honourLimits_(honourLimits), shape_(makeDpShape(problem, honourLimits)) {
    rowLength_ = static_cast<std::size_t>(shape_.deviceUnits) + 1;
    std::size_t rows = static_cast<std::size_t>(shape_.stageCounts) * (shape_.layers + 1);
    if (rows * rowLength_ > kMaxDpEntries)
      throw StageError(fmt::format(
          "stage problem too large for the DP: {} stage counts x {} layers x {} device units",
          shape_.stageCounts, shape_.layers + 1, rowLength_));
    table_.resize(rows * rowLength_);
    rowLo_.resize(rows);
    rowHi_.resize(rows);
  }

  /// Runs the DP with every stage latency at most `cap`; returns the best plan
  /// under that cap, if any.
  std::optional<Candidate> run(double cap) {
    cap_ = cap;
    fill();
    return reconstruct();
  }

 private:
  std::size_t row(int q, int i) const {
    return static_cast<std::size_t>(q) * (shape_.layers + 1) + i;
  }
  double* data(int q, int i) { return table_.data() + row(q, i) * rowLength_; }
  bool empty(int q, int i) const { return rowLo_[row(q, i)] > rowHi_[row(q, i)]; }

  bool allowed(std::size_t entry, int successors) const {
    if (!(p_.cost[entry] <= cap_)) return false;
    return !honourLimits_ || p_.maxSuccStages.empty() || successors <= p_.maxSuccStages[entry];
  }

  // The cheapest config of stage (i..j, s) that the cap and the memory limit allow.
  double bestConfig(std::size_t base, int successors) const {
    double best = kInf;
    for (int g = 0; g < shape_.configs; ++g)
      if (allowed(base + g, successors)) best = std::min(best, p_.cost[base + g]);
    return best;
  }

  // The largest max_n_succ_stages among the configs of one stage that the cap
  // admits: no successor count beyond it can use the stage.
  int loosestLimit(std::size_t base) const {
    if (!honourLimits_ || p_.maxSuccStages.empty()) return StageProblem::kUnlimited;
    int loosest = -1;
    for (int g = 0; g < shape_.configs; ++g)
      if (p_.cost[base + g] <= cap_) loosest = std::max(loosest, p_.maxSuccStages[base + g]);
    return loosest;
  }

  int bucket(int q) const { return std::min(q, shape_.stageCounts - 1); }

  void fill() {
    std::fill(table_.begin(), table_.end(), kInf);
    std::fill(rowLo_.begin(), rowLo_.end(), shape_.deviceUnits + 1);
    std::fill(rowHi_.begin(), rowHi_.end(), -1);
    data(0, shape_.layers)[0] = 0;
    rowLo_[row(0, shape_.layers)] = rowHi_[row(0, shape_.layers)] = 0;
    for (int i = shape_.layers - 1; i >= 0; --i)
      for (int j = i; j < shape_.layers; ++j)
        for (int s = 0; s < shape_.numSubmeshes; ++s) relaxStage(i, j, s);
  }

  // F[q'+1][i][d] <- min(..., c + F[q'][j+1][d − size]) for every successor count q'.
  void relaxStage(int i, int j, int s) {
    std::size_t base = p_.index(i, j, s, 0);
    int maxSuccessors =
        std::min({shape_.stageCounts - 1, shape_.layers - j - 1, loosestLimit(base)});
    for (int succ = 0; succ <= maxSuccessors; ++succ) {
      if (empty(succ, j + 1)) continue;
      double c = bestConfig(base, succ);
      if (c == kInf) continue;
      relaxRow(bucket(succ + 1), i, succ, j + 1, c, shape_.submeshUnits[s]);
    }
  }

  void relaxRow(int q, int i, int srcQ, int srcI, double c, int size) {
    std::size_t src = row(srcQ, srcI), dst = row(q, i);
    int lo = rowLo_[src] + size;
    int hi = std::min(rowHi_[src] + size, shape_.deviceUnits);
    if (lo > hi) return;
    const double* __restrict in = data(srcQ, srcI) - size;
    double* __restrict out = data(q, i);
    for (int d = lo; d <= hi; ++d) {
      double v = c + in[d];
      out[d] = v < out[d] ? v : out[d];
    }
    rowLo_[dst] = std::min(rowLo_[dst], lo);
    rowHi_[dst] = std::max(rowHi_[dst], hi);
  }

  // Walks the table back from F[q][0][D], taking at each state the first
  // transition (in order of j, submesh, config, successor count) that produces
  // its value exactly. This fixes the tie-breaking among equal sums without
  // storing an argmin table.
  std::optional<Candidate> reconstruct() {
    int q = 0;
    for (int k = 1; k < shape_.stageCounts; ++k)
      if (at(k, 0, shape_.deviceUnits) < at(q, 0, shape_.deviceUnits)) q = k;
    if (at(q, 0, shape_.deviceUnits) == kInf) return std::nullopt;
    Candidate plan;
    int i = 0, d = shape_.deviceUnits;
    while (i < shape_.layers) {
      Stage stage = nextStage(q, i, d);
      i = stage.endLayer;
      d -= shape_.submeshUnits[stage.submesh];
      plan.stages.push_back(stage);
    }
    // Sum from the last stage, in the order the DP added them, so the sum is
    // bit-identical to the table's.
    for (auto it = plan.stages.rbegin(); it != plan.stages.rend(); ++it) {
      plan.latencySum = it->latency + plan.latencySum;
      plan.maxLatency = std::max(plan.maxLatency, it->latency);
    }
    plan.cost = plan.latencySum + (p_.microbatches - 1) * plan.maxLatency;
    return plan;
  }

  double at(int q, int i, int d) { return data(q, i)[d]; }

  Stage nextStage(int& q, int i, int d) {
    double target = at(q, i, d);
    for (int j = i; j < shape_.layers; ++j)
      for (int s = 0; s < shape_.numSubmeshes; ++s) {
        int size = shape_.submeshUnits[s];
        if (size > d) continue;
        for (int g = 0; g < shape_.configs; ++g)
          for (int succ : successorCounts(q)) {
            std::size_t entry = p_.index(i, j, s, g);
            if (succ < 0 || !allowed(entry, succ)) continue;
            if (p_.cost[entry] + at(succ, j + 1, d - size) != target) continue;
            q = succ;
            return Stage{i, j + 1, s, g, p_.cost[entry]};
          }
      }
    throw std::logic_error("StageDp: table value has no producing transition");
  }

  // The successor counts q' whose bucket(q' + 1) is q.
  std::array<int, 2> successorCounts(int q) const {
    if (q < shape_.stageCounts - 1) return {q - 1, -1};
    return {q - 1, q};
  }

  const StageProblem& p_;
  bool honourLimits_;
  DpShape shape_;
  std::size_t rowLength_ = 0;
  std::vector<double> table_;
  std::vector<int> rowLo_, rowHi_;
  double cap_ = kInf;
};

// Every latency that some stage can actually take: the candidate values of t_max.
std::vector<double> distinctCosts(const StageProblem& p) {
  std::vector<double> costs;
  int numSubmeshes = static_cast<int>(p.submeshes.size());
  for (int i = 0; i < p.layers; ++i)
    for (int j = i; j < p.layers; ++j)
      for (int s = 0; s < numSubmeshes; ++s)
        for (int g = 0; g < p.configs; ++g) {
          std::size_t entry = p.index(i, j, s, g);
          bool limitAllows = p.maxSuccStages.empty() || p.maxSuccStages[entry] >= 0;
          if (p.cost[entry] != kInf && limitAllows) costs.push_back(p.cost[entry]);
        }
  std::sort(costs.begin(), costs.end());
  costs.erase(std::unique(costs.begin(), costs.end()), costs.end());
  return costs;
}

bool layerHasStage(const StageProblem& p, int layer) {
  int numSubmeshes = static_cast<int>(p.submeshes.size());
  for (int i = 0; i <= layer; ++i)
    for (int j = layer; j < p.layers; ++j)
      for (int s = 0; s < numSubmeshes; ++s)
        for (int g = 0; g < p.configs; ++g) {
          std::size_t entry = p.index(i, j, s, g);
          bool limitAllows = p.maxSuccStages.empty() || p.maxSuccStages[entry] >= 0;
          if (p.cost[entry] != kInf && limitAllows) return true;
        }
  return false;
}

// The fewest submeshes from the list whose sizes sum to exactly the cluster, by
// a coin-change DP; −1 if none.
int fewestSubmeshes(const StageProblem& p) {
  int devices = p.nodes * p.devicesPerNode;
  std::vector<int> fewest(devices + 1, -1);
  fewest[0] = 0;
  for (int d = 1; d <= devices; ++d)
    for (SubmeshShape s : p.submeshes) {
      int rest = d - s.devices();
      if (rest >= 0 && fewest[rest] >= 0 && (fewest[d] < 0 || fewest[rest] + 1 < fewest[d]))
        fewest[d] = fewest[rest] + 1;
    }
  return fewest[devices];
}

// Says why nothing is feasible, when a cheap check can tell.
StageError noFeasiblePlan(const StageProblem& p) {
  int devices = p.nodes * p.devicesPerNode;
  for (int layer = 0; layer < p.layers; ++layer)
    if (!layerHasStage(p, layer))
      return StageError(
          fmt::format("no feasible plan: no stage that holds layer {} is feasible "
                      "on any submesh",
                      layer));
  int fewest = fewestSubmeshes(p);
  if (fewest < 0 || fewest > p.layers)
    return StageError(fmt::format(
        "no feasible plan: the cluster's {} devices cannot be split into at most {} submeshes "
        "(one per stage, each stage holding at least one layer) from the list",
        devices, p.layers));
  if (!p.maxSuccStages.empty() && StageDp(p, false).run(kInf))
    return StageError(
        "no feasible plan: every plan that covers the layers and devices puts more stages after "
        "some stage than its max_n_succ_stages allows");
  return StageError(fmt::format(
      "no feasible plan: no sequence of feasible stages covers layers 0..{} with submeshes that "
      "take exactly {} devices",
      p.layers - 1, devices));
}

// Alpa's t_max enumeration. Every plan whose largest stage is t has cost at
// least Σ_min + (B−1)·t, where Σ_min is the least sum with no cap, so the
// enumeration stops as soon as that bound reaches the best cost found. (Alpa
// stops at B·t ≥ best; Σ_min ≥ t_min makes this bound at least as tight.)
// Candidates are compared with a strict <, in a fixed order, so ties resolve
// the same way on every run.
class TmaxSearch {
 public:
  TmaxSearch(const StageProblem& problem, const StageSolveOptions& options)
      : p_(problem), options_(options), dp_(problem, true), costs_(distinctCosts(problem)) {
    if (options.timeBudgetSeconds)
      deadline_ = std::chrono::steady_clock::now() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                      std::chrono::duration<double>(*options.timeBudgetSeconds));
  }

  StageSolution run() {
    if (costs_.empty()) throw noFeasiblePlan(p_);
    tried_.assign(costs_.size(), false);
    std::size_t last = costs_.size() - 1;
    consider(last);
    if (!best_) throw noFeasiblePlan(p_);
    double leastSum = best_->latencySum;
    for (std::size_t k = firstFeasible(); k < last && !stopped_; ++k) {
      if (leastSum + (p_.microbatches - 1) * costs_[k] >= best_->cost) break;
      k = coveringCap(k);
      consider(k);
    }
    return solution();
  }

 private:
  // The cap to try for candidate k: k itself when exact, else the largest
  // candidate within the gap above it (which covers every candidate between).
  std::size_t coveringCap(std::size_t k) const {
    if (p_.tmaxGap <= 0) return k;
    double reach = costs_[k] * (1 + p_.tmaxGap);
    auto end = std::upper_bound(costs_.begin() + std::ptrdiff_t(k), costs_.end(), reach);
    return std::size_t(end - costs_.begin()) - 1;
  }

  // Feasibility only grows with the cap, so a binary search skips the prefix of
  // caps under which no plan exists; each probe is a candidate as well.
  std::size_t firstFeasible() {
    std::size_t lo = 0, hi = costs_.size() - 1;
    while (lo < hi) {
      std::size_t mid = lo + (hi - lo) / 2;
      if (consider(mid))
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }

  bool consider(std::size_t k) {
    if (tried_[k]) return true;  // only feasible caps are revisited
    // With a plan in hand, a spent budget ends the search (its answers no
    // longer matter: the loops above stop on stopped_).
    if (best_ && deadline_ && std::chrono::steady_clock::now() >= *deadline_) {
      stopped_ = true;
      return true;
    }
    checkpoint(options_.control, 1);
    tried_[k] = true;
    ++runs_;
    std::optional<Candidate> found = dp_.run(costs_[k]);
    if (found && (!best_ || found->cost < best_->cost)) best_ = std::move(found);
    return found.has_value();
  }

  StageSolution solution() const {
    StageSolution out;
    out.cost = best_->cost;
    out.latencySum = best_->latencySum;
    out.maxLatency = best_->maxLatency;
    out.stages = best_->stages;
    out.distinctCosts = static_cast<std::int64_t>(costs_.size());
    out.dpRuns = runs_;
    out.optimal = !stopped_;
    return out;
  }

  const StageProblem& p_;
  const StageSolveOptions& options_;
  std::optional<std::chrono::steady_clock::time_point> deadline_;
  bool stopped_ = false;
  StageDp dp_;
  std::vector<double> costs_;
  std::vector<bool> tried_;
  std::optional<Candidate> best_;
  std::int64_t runs_ = 0;
};

}  // namespace

StageSolution solveStages(const StageProblem& problem, const StageSolveOptions& options) {
  validateStageProblem(problem);
  return TmaxSearch(problem, options).run();
}

}  // namespace meshflow::passes
