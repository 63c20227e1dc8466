#include "passes/Placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "ir/Counted.h"
#include "passes/PlacementEncoding.h"

namespace meshflow::passes {
namespace {

void validate(const ir::Cluster& cluster, const PlacementRequest& request) {
  const std::int64_t n = cluster.nodes, m = cluster.devicesPerNode, total = n * m;
  if (n < 1 || m < 1)
    throw PlacementError(fmt::format("cluster: expected positive N x M, got {}x{}", n, m));
  if (request.stages.empty()) throw PlacementError("stages: expected at least one stage");
  for (std::size_t s = 0; s < request.stages.size(); ++s) {
    SubmeshShape shape = request.stages[s];
    std::string where =
        fmt::format("stage {}: submesh ({}, {})", s, shape.nodes, shape.devicesPerNode);
    if (shape.nodes < 1 || shape.devicesPerNode < 1 || shape.nodes > n ||
        shape.devicesPerNode > m || m % shape.devicesPerNode != 0)
      throw PlacementError(fmt::format("{} does not fit a {}x{} cluster", where, n, m));
    if (shape.nodes > 1 && shape.devicesPerNode != m)
      throw PlacementError(fmt::format("{} spans nodes without taking whole nodes", where));
  }
  for (const PlacementPin& pin : request.pins) {
    if (pin.stage < 0 || pin.stage >= int(request.stages.size()))
      throw PlacementError(
          fmt::format("pin of stage {}: there are {} stages", pin.stage, request.stages.size()));
    for (int d : pin.devices)
      if (d < 0 || d >= total)
        throw PlacementError(fmt::format(
            "pin of stage {}: device {} is not in the {}-device cluster", pin.stage, d, total));
  }
  std::set<int> excluded;
  for (int d : request.excluded) {
    if (d < 0 || d >= total)
      throw PlacementError(
          fmt::format("exclusion of device {}: not in the {}-device cluster", d, total));
    excluded.insert(d);
  }
  std::int64_t wanted = 0, available = total - std::int64_t(excluded.size());
  for (SubmeshShape shape : request.stages) wanted += shape.devices();
  if (wanted < available)
    throw PlacementError(fmt::format(
        "the stages' submeshes cover {}, but {} are available after {}; "
        "a placement uses every device that is not excluded (exclude the ones to leave idle)",
        ir::counted(wanted, "device"), available,
        ir::counted(std::int64_t(excluded.size()), "exclusion")));
  if (wanted > available)
    throw PlacementError(fmt::format(
        "the stages' submeshes need {}, but only {} are available after {}",
        ir::counted(wanted, "device"), available,
        ir::counted(std::int64_t(excluded.size()), "exclusion")));
}

// Depth-first search over the stages in order, each trying its starts in
// ascending order, so the first complete placement it reaches is the
// lexicographically smallest valid one with at most `target` crossings. With
// the lower bound as target that is the answer. A stage only takes free devices
// that no other stage is pinned to, and a branch is cut as soon as a later
// pinned stage has no free start left or the crossings it must reach exceed the
// target. Most requests need no backtracking at all: without hints, whole-node
// stages such as Megatron's 64 stages of 6 nodes are packed in order at once.
// The search gives up after a budget of steps and leaves the request to Z3.
class LexSearch {
 public:
  LexSearch(const ir::Cluster& cluster, const PlacementRequest& request)
      : cluster_(cluster),
        stages_(request.stages),
        perNode_(int(cluster.devicesPerNode)),
        target_(placement::crossingsLowerBound(cluster, request.stages)),
        owner_(std::size_t(cluster.deviceCount()), kFree),
        pinnedTo_(owner_.size(), kFree),
        pins_(stages_.size()) {
    for (int d : request.excluded) owner_[std::size_t(d)] = kExcluded;
    for (const PlacementPin& pin : request.pins)
      for (int d : pin.devices) {
        pinnedTo_[std::size_t(d)] = pin.stage;
        pins_[std::size_t(pin.stage)].push_back(d);
      }
    // A pinned stage only ever tries the few starts that hold its pins.
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      std::vector<int> starts = placement::startsOf(cluster, stages_[s]);
      std::erase_if(starts, [&](int start) {
        return std::any_of(pins_[s].begin(), pins_[s].end(),
                           [&](int d) { return d < start || d >= start + stages_[s].devices(); });
      });
      starts_.push_back(std::move(starts));
      if (!pins_[s].empty()) pinnedStages_.push_back(s);
    }
  }

  // The lexicographically smallest placement with the fewest crossings, trying
  // each count from the lower bound up: a search that ends within the budget
  // without a placement proves the count too low. Nothing when the budget runs
  // out first or no placement exists; then `seed()` holds the least count not
  // ruled out and, if a search without the crossing cut finds one within a
  // second budget, some valid placement for Z3 to start from.
  std::optional<Placement> run() {
    int most = std::max(int(stages_.size()) - 1, 0);
    for (; target_ <= most; ++target_) {
      if (place(0, 0)) return result();
      if (steps_ > kBudget) break;
    }
    seed_.fewestCrossings = target_;
    if (target_ <= most) {
      target_ = most;
      steps_ = 0;
      if (place(0, 0)) seed_.starts = firsts_;
    }
    return std::nullopt;
  }

  const placement::Seed& seed() const { return seed_; }

 private:
  static constexpr int kFree = -1, kExcluded = -2;
  // Stage placements tried before the search leaves the request to Z3: enough
  // for a few dead ends per stage, little next to one Z3 check.
  static constexpr int kBudget = 4000;

  Placement result() const {
    Placement found;
    found.crossNodeBoundaries = placement::countCrossings(cluster_, stages_, firsts_);
    for (std::size_t s = 0; s < stages_.size(); ++s) {
      std::vector<int> ids(std::size_t(stages_[s].devices()));
      std::iota(ids.begin(), ids.end(), firsts_[s]);
      found.devices.push_back(std::move(ids));
    }
    return found;
  }

  bool whole(std::size_t s) const { return stages_[s].devicesPerNode == perNode_; }

  // Whether stage s can take its devices from `start` (one of starts_[s], which
  // hold its pins): they are free and pinned to no other stage.
  bool fits(std::size_t s, int start) const {
    int end = start + stages_[s].devices();
    for (int d = start; d < end; ++d)
      if (owner_[std::size_t(d)] != kFree ||
          (pinnedTo_[std::size_t(d)] != kFree && pinnedTo_[std::size_t(d)] != int(s)))
        return false;
    return true;
  }

  void take(std::size_t s, int start, int owner) {
    for (int d = start; d < start + stages_[s].devices(); ++d) owner_[std::size_t(d)] = owner;
  }

  // The fewest crossings stages s + 1, … can add once stage s is placed: every
  // pair with a whole-node stage, and per run of sub-node stages the nodes its
  // devices need. The run that continues stage s's may also use what is left
  // of stage s's node; any other run's first node costs no crossing.
  int crossingsAfter(std::size_t s) const {
    int bound = 0;
    bool continues = !whole(s);
    std::int64_t room = 0, devices = 0;
    if (continues) {
      int node = firsts_[s] / perNode_;
      for (int d = node * perNode_; d < (node + 1) * perNode_; ++d)
        room += owner_[std::size_t(d)] == kFree;
    }
    auto endRun = [&] {
      if (devices > 0)
        bound += continues
                     ? int((std::max<std::int64_t>(devices - room, 0) + perNode_ - 1) / perNode_)
                     : int((devices + perNode_ - 1) / perNode_) - 1;
      continues = false;
      devices = 0;
    };
    for (std::size_t t = s + 1; t < stages_.size(); ++t) {
      if (whole(t - 1) || whole(t)) ++bound;
      if (whole(t)) {
        endRun();
      } else {
        devices += stages_[t].devices();
      }
    }
    endRun();
    return bound;
  }

  bool pinnedStagesCanStart(std::size_t placed) const {
    for (std::size_t t : pinnedStages_)
      if (t > placed && std::none_of(starts_[t].begin(), starts_[t].end(),
                                     [&](int start) { return fits(t, start); }))
        return false;
    return true;
  }

  bool place(std::size_t s, int crossings) {
    if (s == stages_.size()) return true;
    for (int start : starts_[s]) {
      if (!fits(s, start)) continue;
      if (++steps_ > kBudget) return false;
      int now = crossings;
      if (s > 0) now += whole(s - 1) || whole(s) || firsts_[s - 1] / perNode_ != start / perNode_;
      firsts_.push_back(start);
      take(s, start, int(s));
      if (now + crossingsAfter(s) <= target_ && pinnedStagesCanStart(s) && place(s + 1, now))
        return true;
      take(s, start, kFree);
      firsts_.pop_back();
      if (steps_ > kBudget) return false;
    }
    return false;
  }

  const ir::Cluster& cluster_;
  const std::vector<SubmeshShape>& stages_;
  int perNode_, target_;
  int steps_ = 0;
  std::vector<int> owner_, pinnedTo_;  // per device: a stage, kFree or kExcluded
  std::vector<std::vector<int>> pins_, starts_;
  std::vector<std::size_t> pinnedStages_;
  std::vector<int> firsts_;
  placement::Seed seed_;
};

// With no pins and no exclusions every node is alike, so where the whole-node
// stages go does not matter to the crossings: only which sub-node stages share
// a node does, and they fill exactly the nodes whole-node stages leave. The
// request is solved on a smaller cluster where each run of consecutive
// whole-node stages is one (1, M) stage (it keeps the crossings around the run
// forced), and the answer is laid out in stage order: a whole-node stage takes
// the next free nodes, a sub-node stage its node's, the next free one the first
// time the node is met. Nothing when the smaller cluster would not be smaller.
std::optional<Placement> placeByNodes(const ir::Cluster& cluster, const PlacementRequest& request) {
  if (!request.pins.empty() || !request.excluded.empty()) return std::nullopt;
  const int perNode = int(cluster.devicesPerNode);
  PlacementRequest reduced;
  std::vector<int> index(request.stages.size(), -1);  // a sub-node stage's in `reduced`
  int wholeNodes = 0, runs = 0;
  for (std::size_t s = 0; s < request.stages.size(); ++s) {
    SubmeshShape shape = request.stages[s];
    if (shape.devicesPerNode == perNode) {
      wholeNodes += shape.nodes;
      if (s == 0 || request.stages[s - 1].devicesPerNode != perNode) {
        reduced.stages.push_back({1, perNode});
        ++runs;
      }
    } else {
      index[s] = int(reduced.stages.size());
      reduced.stages.push_back(shape);
    }
  }
  ir::Cluster smaller = cluster;
  smaller.nodes = cluster.nodes - wholeNodes + runs;
  if (runs == 0 || smaller.nodes >= cluster.nodes || int(reduced.stages.size()) == runs)
    return std::nullopt;
  Placement inner;
  try {
    inner = placeStages(smaller, reduced);
  } catch (const PlacementError&) {
    throw PlacementError(fmt::format("the stage shapes cannot be packed onto the {}x{} cluster",
                                     cluster.nodes, cluster.devicesPerNode));
  }
  std::map<int, int> nodeOf;  // node in `smaller` -> node in `cluster`
  int next = 0;
  std::vector<int> firsts;
  for (std::size_t s = 0; s < request.stages.size(); ++s) {
    if (index[s] < 0) {
      firsts.push_back(next * perNode);
      next += request.stages[s].nodes;
      continue;
    }
    int first = inner.devices[std::size_t(index[s])].front();
    auto [at, added] = nodeOf.emplace(first / perNode, next);
    if (added) ++next;
    firsts.push_back(at->second * perNode + first % perNode);
  }
  Placement placed;
  placed.crossNodeBoundaries = placement::countCrossings(cluster, request.stages, firsts);
  for (std::size_t s = 0; s < request.stages.size(); ++s) {
    std::vector<int> ids(std::size_t(request.stages[s].devices()));
    std::iota(ids.begin(), ids.end(), firsts[s]);
    placed.devices.push_back(std::move(ids));
  }
  return placed;
}

}  // namespace

Placement placeStages(const ir::Cluster& cluster, const PlacementRequest& request) {
  validate(cluster, request);
  LexSearch search(cluster, request);
  if (std::optional<Placement> found = search.run()) return *found;
  if (std::optional<Placement> found = placeByNodes(cluster, request)) return *found;
  return placement::solveExactCover(cluster, request, search.seed());
}

}  // namespace meshflow::passes
