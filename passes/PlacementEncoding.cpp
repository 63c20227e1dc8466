#include "passes/PlacementEncoding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <z3++.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

namespace meshflow::passes::placement {
namespace {

// Z3's own randomness is fixed per solver, never through its global parameters,
// so two placements in one process cannot influence each other.
constexpr unsigned kSeed = 0;

bool wholeNodes(const ir::Cluster& cluster, SubmeshShape shape) {
  return shape.devicesPerNode == cluster.devicesPerNode;
}

struct Hint {
  std::string name;  // how the error message names it
  z3::expr literal;  // the tracked assumption that switches it on
};

// Stage s starting at starts_[s][i] is the boolean choices_[s][i]. A device is
// covered by the choices whose range holds it; devices are grouped in blocks of
// g ids (g the gcd of the shapes' devices per node), which every range either
// holds whole or misses, so cover constraints are stated once per block.
class ExactCover {
 public:
  ExactCover(const ir::Cluster& cluster, const PlacementRequest& request)
      : cluster_(cluster),
        request_(request),
        perNode_(int(cluster.devicesPerNode)),
        block_(perNode_),
        solver_(ctx_),
        model_(ctx_),
        crossing_(ctx_),
        allExclusions_(ctx_.bool_val(true)) {
    // The default solver (Z3's SMT core, as checks use assumptions) beat the
    // QF_FD SAT solver on the crossing search: 0.6 s against 24 s for 30
    // interleaved sub-node stages on 12 nodes.
    z3::params params(ctx_);
    params.set("random_seed", kSeed);
    solver_.set(params);
    for (SubmeshShape shape : request_.stages) block_ = std::gcd(block_, shape.devicesPerNode);
    makeChoices();
    makeHints();
    addCover();
    addExclusions();
    addNodes();
    addSharing();
  }

  Placement solve(const Seed& seed) {
    z3::expr_vector assumptions(ctx_);
    for (const Hint& h : hints_) assumptions.push_back(h.literal);
    if (!holdsWith(assumptions, seed.starts) && solver_.check(assumptions) != z3::sat)
      throw PlacementError(conflictMessage());
    // Adding assertions discards the solver's model, so take it first.
    model_ = solver_.get_model();
    for (const Hint& h : hints_) solver_.add(h.literal);
    addChains();
    Placement placement;
    placement.crossNodeBoundaries = minimiseCrossings(seed.fewestCrossings);
    used_.assign(std::size_t(cluster_.deviceCount()), false);
    for (int d : excluded_) used_[std::size_t(d)] = true;
    for (std::size_t s = 0; s < request_.stages.size();) s = fixLeastStarts(s);
    for (std::size_t s = 0; s < request_.stages.size(); ++s) {
      std::vector<int> ids(std::size_t(sizeOf(s)));
      std::iota(ids.begin(), ids.end(), starts_[s][fixed_[s]]);
      placement.devices.push_back(std::move(ids));
    }
    return placement;
  }

 private:
  // Whether the hints hold with every stage s at starts[s]. A placement found
  // by search gives the solver its first model at once, and the values it
  // keeps from it lead later checks to nearby placements.
  bool holdsWith(const z3::expr_vector& hints, const std::vector<int>& starts) {
    if (starts.size() != request_.stages.size()) return false;
    z3::expr_vector assumptions(ctx_);  // not a copy of `hints`: that would share its list
    for (const z3::expr& h : hints) assumptions.push_back(h);
    for (std::size_t s = 0; s < starts.size(); ++s) {
      auto at = std::lower_bound(starts_[s].begin(), starts_[s].end(), starts[s]);
      if (at == starts_[s].end() || *at != starts[s]) return false;
      assumptions.push_back(choices_[s][unsigned(at - starts_[s].begin())]);
    }
    return solver_.check(assumptions) == z3::sat;
  }

  z3::expr fresh(const std::string& name) { return ctx_.bool_const(name.c_str()); }

  int sizeOf(std::size_t s) const { return request_.stages[s].devices(); }

  // One boolean per valid start of each stage; each stage takes exactly one.
  void makeChoices() {
    for (std::size_t s = 0; s < request_.stages.size(); ++s) {
      starts_.push_back(startsOf(cluster_, request_.stages[s]));
      z3::expr_vector choices(ctx_);
      for (int start : starts_[s]) choices.push_back(fresh(fmt::format("s{}@{}", s, start)));
      solver_.add(z3::mk_or(choices));
      solver_.add(z3::atmost(choices, 1));
      choices_.push_back(choices);
    }
  }

  // Per block, the choices covering it: whole-node choices are gathered per
  // node first, and stand in a block's constraint as one literal that equals
  // their sum, so a block's constraint stays short on a large cluster.
  void addCover() {
    int nodes = int(cluster_.nodes), blocksPerNode = perNode_ / block_;
    // Each vector is made on its own: copies of a z3::expr_vector share one list.
    std::vector<z3::expr_vector> wholeOn;
    for (int k = 0; k < nodes; ++k) wholeOn.emplace_back(ctx_);
    for (int b = 0; b < nodes * blocksPerNode; ++b) coverOf_.emplace_back(ctx_);
    for (std::size_t s = 0; s < request_.stages.size(); ++s) {
      SubmeshShape shape = request_.stages[s];
      for (std::size_t i = 0; i < starts_[s].size(); ++i) {
        int start = starts_[s][i];
        if (wholeNodes(cluster_, shape)) {
          for (int k = start / perNode_; k < start / perNode_ + shape.nodes; ++k)
            wholeOn[std::size_t(k)].push_back(choices_[s][unsigned(i)]);
        } else {
          for (int b = start / block_; b < (start + shape.devicesPerNode) / block_; ++b)
            coverOf_[std::size_t(b)].push_back(choices_[s][unsigned(i)]);
        }
      }
    }
    for (int k = 0; k < nodes; ++k) {
      z3::expr_vector& whole = wholeOn[std::size_t(k)];
      if (whole.size() > 1 && blocksPerNode > 1) {
        z3::expr sum = fresh(fmt::format("whole{}", k));
        whole.push_back(sum);
        std::vector<int> coeffs(whole.size(), 1);
        coeffs.back() = -1;
        solver_.add(z3::pbeq(whole, coeffs.data(), 0));
        whole = z3::expr_vector(ctx_);
        whole.push_back(sum);
      }
      for (int b = k * blocksPerNode; b < (k + 1) * blocksPerNode; ++b)
        for (const z3::expr& w : whole) coverOf_[std::size_t(b)].push_back(w);
      wholeAt_.push_back(whole);
    }
    for (std::size_t b = 0; b < coverOf_.size(); ++b) addBlockCover(int(b));
  }

  // At most one range holds a block. When every exclusion holds, the ranges
  // cover every device that is not excluded (they avoid the excluded ones and
  // their sizes add up to the rest), so the block is covered: a consequence,
  // stated because it lets Z3 see a hole long before running out of stages.
  void addBlockCover(int b) {
    const z3::expr_vector& cover = coverOf_[std::size_t(b)];
    if (cover.size() > 1) solver_.add(z3::atmost(cover, 1));
    bool needed = false;
    for (int d = b * block_; d < (b + 1) * block_; ++d) needed |= !excluded_.count(d);
    if (needed)
      solver_.add(
          z3::implies(allExclusions_, cover.empty() ? ctx_.bool_val(false) : z3::mk_or(cover)));
  }

  // Every pin and every exclusion is an assumption literal that switches it on.
  void makeHints() {
    for (std::size_t i = 0; i < request_.pins.size(); ++i) {
      const PlacementPin& pin = request_.pins[i];
      std::size_t s = std::size_t(pin.stage);
      z3::expr_vector holding(ctx_);
      for (std::size_t c = 0; c < starts_[s].size(); ++c) {
        int start = starts_[s][c];
        bool holds = true;
        for (int d : pin.devices) holds &= start <= d && d < start + sizeOf(s);
        if (holds) holding.push_back(choices_[s][unsigned(c)]);
      }
      Hint hint{
          fmt::format("pin of stage {} on devices [{}]", pin.stage, fmt::join(pin.devices, ", ")),
          fresh(fmt::format("pin{}", i))};
      solver_.add(
          z3::implies(hint.literal, holding.empty() ? ctx_.bool_val(false) : z3::mk_or(holding)));
      hints_.push_back(hint);
    }
    z3::expr_vector dropped(ctx_);
    for (std::size_t i = 0; i < request_.excluded.size(); ++i) {
      int device = request_.excluded[i];
      excluded_.insert(device);
      hints_.push_back(
          {fmt::format("exclusion of device {}", device), fresh(fmt::format("exclude{}", i))});
      dropped.push_back(!hints_.back().literal);
    }
    if (!dropped.empty()) {
      allExclusions_ = fresh("allExclusions");
      dropped.push_back(allExclusions_);
      solver_.add(z3::mk_or(dropped));
    }
  }

  // An exclusion forbids every range holding its device.
  void addExclusions() {
    for (std::size_t i = 0; i < request_.excluded.size(); ++i) {
      const z3::expr& literal = hints_[request_.pins.size() + i].literal;
      for (const z3::expr& c : coverOf_[std::size_t(request_.excluded[i] / block_)])
        solver_.add(!literal || !c);
    }
  }

  // Where a whole-node stage ends, the next node is free of whole-node stages
  // or starts one: a consequence of the cover, stated per stage length so that
  // one choice propagates along the nodes (when every stage has 6 nodes, a
  // start at node 1 forces starts at 7, 13, … and runs past the end at once).
  // Without it Z3 searches long to rule out starts off the multiples of the
  // length: 291 s instead of 19 s to fix the first ids of Megatron's stages
  // with one pin on 384 nodes. It is added after the first check, which it
  // made several times slower there.
  void addChains() {
    int nodes = int(cluster_.nodes);
    std::map<int, std::vector<z3::expr_vector>> lengthAt;  // [n][k]: n-node stages starting at k
    std::vector<z3::expr_vector> anyAt;                    // [k]: whole-node stages starting at k
    for (int k = 0; k < nodes; ++k) anyAt.emplace_back(ctx_);
    for (std::size_t s = 0; s < request_.stages.size(); ++s) {
      if (!wholeNodes(cluster_, request_.stages[s])) continue;
      auto& at = lengthAt[request_.stages[s].nodes];
      if (at.empty())
        for (int k = 0; k < nodes; ++k) at.emplace_back(ctx_);
      for (std::size_t i = 0; i < starts_[s].size(); ++i) {
        std::size_t k = std::size_t(starts_[s][i] / perNode_);
        at[k].push_back(choices_[s][unsigned(i)]);
        anyAt[k].push_back(choices_[s][unsigned(i)]);
      }
    }
    for (auto& [length, at] : lengthAt)
      for (int k = 0; k + length < nodes; ++k) {
        if (at[std::size_t(k)].empty()) continue;
        std::size_t next = std::size_t(k + length);
        solver_.add(!anyOf(at[std::size_t(k)], fmt::format("start{}at{}", length, k)) ||
                    anyOf(anyAt[next], fmt::format("startAt{}", next)) ||
                    !anyOf(wholeAt_[next], fmt::format("covered{}", next)));
      }
  }

  // A literal equal to the disjunction of `v`: `v`'s one member, or a fresh
  // literal named `name` tied to it, made once per name.
  z3::expr anyOf(const z3::expr_vector& v, const std::string& name) {
    if (v.empty()) return ctx_.bool_val(false);
    if (v.size() == 1) return v[0];
    auto it = disjunctions_.find(name);
    if (it != disjunctions_.end()) return it->second;
    z3::expr literal = fresh(name);
    for (const z3::expr& x : v) solver_.add(!x || literal);
    solver_.add(!literal || z3::mk_or(v));
    disjunctions_.emplace(name, literal);
    return literal;
  }

  // inNode_[s][k] holds when sub-node stage s is in node k. The sub-node stages
  // in a node fit in what whole-node stages leave of it: a consequence of the
  // cover, stated so the solver reasons about nodes and not only devices.
  void addNodes() {
    if (block_ == perNode_) return;  // only whole-node stages
    int nodes = int(cluster_.nodes);
    std::vector<z3::expr_vector> load;
    std::vector<std::vector<int>> weights(static_cast<std::size_t>(nodes));
    for (int k = 0; k < nodes; ++k) {
      load.emplace_back(ctx_);
      for (const z3::expr& w : wholeAt_[std::size_t(k)]) {
        load.back().push_back(w);
        weights[std::size_t(k)].push_back(perNode_);
      }
    }
    inNode_.resize(request_.stages.size());
    for (std::size_t s = 0; s < request_.stages.size(); ++s) {
      if (wholeNodes(cluster_, request_.stages[s])) continue;
      std::size_t slots = std::size_t(perNode_ / request_.stages[s].devicesPerNode);
      for (std::size_t k = 0; k < std::size_t(nodes); ++k) {
        z3::expr in = fresh(fmt::format("s{}in{}", s, k));
        z3::expr_vector here(ctx_);
        for (std::size_t i = k * slots; i < (k + 1) * slots; ++i) {
          here.push_back(choices_[s][unsigned(i)]);
          solver_.add(!choices_[s][unsigned(i)] || in);
        }
        solver_.add(!in || z3::mk_or(here));
        inNode_[s].push_back(in);
        load[k].push_back(in);
        weights[k].push_back(sizeOf(s));
      }
    }
    for (std::size_t k = 0; k < std::size_t(nodes); ++k)
      if (load[k].size() > 1) solver_.add(z3::pble(load[k], weights[k].data(), perNode_));
  }

  // For adjacent sub-node stages s and s + 1, share_s holds exactly when they
  // are in one node; the crossings of a pair with a whole-node stage are fixed
  // and counted in forced_.
  void addSharing() {
    for (std::size_t s = 0; s + 1 < request_.stages.size(); ++s) {
      if (wholeNodes(cluster_, request_.stages[s]) ||
          wholeNodes(cluster_, request_.stages[s + 1])) {
        ++forced_;
        continue;
      }
      z3::expr share = fresh(fmt::format("share{}", s));
      crossing_.push_back(!share);
      for (std::size_t k = 0; k < std::size_t(cluster_.nodes); ++k) {
        solver_.add(!share || !inNode_[s][k] || inNode_[s + 1][k]);
        solver_.add(share || !inNode_[s][k] || !inNode_[s + 1][k]);
      }
    }
  }

  // A minimal set of hints that cannot hold together: Z3's core, shrunk by
  // dropping each member the others still conflict without.
  std::string conflictMessage() {
    z3::expr_vector core = solver_.unsat_core();
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < hints_.size(); ++i)
      for (unsigned c = 0; c < core.size(); ++c)
        if (z3::eq(core[c], hints_[i].literal)) members.push_back(i);
    for (std::size_t k = 0; k < members.size();) {
      z3::expr_vector rest(ctx_);
      for (std::size_t j = 0; j < members.size(); ++j)
        if (j != k) rest.push_back(hints_[members[j]].literal);
      if (solver_.check(rest) == z3::unsat) {
        members.erase(members.begin() + long(k));
      } else {
        ++k;
      }
    }
    if (members.empty())
      return fmt::format("the stage shapes cannot be packed onto the {}x{} cluster", cluster_.nodes,
                         cluster_.devicesPerNode);
    std::vector<std::string> names;
    for (std::size_t i : members) names.push_back(hints_[i].name);
    if (names.size() == 1) return fmt::format("no placement honours the {}", names[0]);
    return fmt::format("no placement honours these hints together: {}", fmt::join(names, "; "));
  }

  bool check(const z3::expr& guard) {
    z3::expr_vector assumptions(ctx_);
    assumptions.push_back(guard);
    if (solver_.check(assumptions) != z3::sat) return false;
    model_ = solver_.get_model();
    return true;
  }

  // The index of stage s's start in the last model.
  std::size_t chosen(std::size_t s) const {
    for (std::size_t i = 0; i < starts_[s].size(); ++i)
      if (model_.eval(choices_[s][unsigned(i)], true).is_true()) return i;
    throw std::logic_error(fmt::format("placement: the model places no start for stage {}", s));
  }

  int modelCrossings() const {
    std::vector<int> starts;
    for (std::size_t s = 0; s < request_.stages.size(); ++s)
      starts.push_back(starts_[s][chosen(s)]);
    return countCrossings(cluster_, request_.stages, starts);
  }

  // Binary search between the lower bound and the last model's count; every
  // satisfiable probe lowers the upper end to its model's count. Bounds are
  // switched on by guard literals so the solver keeps what it learnt.
  int minimiseCrossings(int fewest) {
    int lo = std::max(fewest, crossingsLowerBound(cluster_, request_.stages));
    int hi = modelCrossings();
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      z3::expr guard = fresh(fmt::format("crossings<={}", mid));
      solver_.add(z3::implies(guard, z3::atmost(crossing_, unsigned(mid - forced_))));
      if (check(guard)) {
        hi = modelCrossings();
      } else {
        lo = mid + 1;
      }
    }
    if (!crossing_.empty()) solver_.add(z3::atmost(crossing_, unsigned(hi - forced_)));
    return hi;
  }

  // Whether stage s may start at its i-th start given the stages already fixed,
  // the exclusions and the stage's pins; no start that fails this is allowed.
  bool startIsFree(std::size_t s, std::size_t i) const {
    int start = starts_[s][i], end = start + sizeOf(s);
    for (int d = start; d < end; ++d)
      if (used_[std::size_t(d)]) return false;
    for (const PlacementPin& pin : request_.pins)
      if (std::size_t(pin.stage) == s)
        for (int d : pin.devices)
          if (d < start || d >= end) return false;
    return true;
  }

  std::size_t firstFreeStart(std::size_t s, std::size_t from) const {
    while (from < starts_[s].size() && !startIsFree(s, from)) ++from;
    return from;
  }

  void fix(std::size_t s, std::size_t i) {
    solver_.add(choices_[s][unsigned(i)]);
    fixed_.push_back(i);
    for (int d = starts_[s][i]; d < starts_[s][i] + sizeOf(s); ++d) used_[std::size_t(d)] = true;
  }

  // Fixes the least starts of stages s, s + 1, … in order and returns the first
  // stage left to fix. First fit from s (each stage at its first free start
  // after the ones before it) gives every stage the least start it could have;
  // the solver accepts some prefix of it, found by binary search, in which the
  // model's agreement and the unsat core's last member narrow the range. The
  // first stage past that prefix needs a larger start, found by fixLeastStart.
  std::size_t fixLeastStarts(std::size_t s) {
    std::vector<std::size_t> greedy;
    std::vector<bool> saved = used_;
    for (std::size_t t = s; t < request_.stages.size(); ++t) {
      std::size_t i = firstFreeStart(t, 0);
      if (i == starts_[t].size()) break;
      greedy.push_back(i);
      for (int d = starts_[t][i]; d < starts_[t][i] + sizeOf(t); ++d) used_[std::size_t(d)] = true;
    }
    used_ = saved;
    std::size_t lo = agreement(s, greedy, 0), hi = greedy.size() + 1;  // lo holds, hi fails
    while (lo + 1 < hi && lo < greedy.size()) {
      std::size_t mid = hi > greedy.size() ? greedy.size() : lo + (hi - lo) / 2;
      z3::expr_vector assumptions(ctx_);
      for (std::size_t k = 0; k < mid; ++k)
        assumptions.push_back(choices_[s + k][unsigned(greedy[k])]);
      if (solver_.check(assumptions) == z3::sat) {
        model_ = solver_.get_model();
        lo = agreement(s, greedy, mid);
      } else {
        hi = std::max(lo + 1, std::min(mid, lastInCore(s, greedy)));
      }
    }
    for (std::size_t k = 0; k < lo; ++k) fix(s + k, greedy[k]);
    if (s + lo == request_.stages.size()) return s + lo;
    fixLeastStart(s + lo, lo < greedy.size() ? greedy[lo] + 1 : 0);
    return s + lo + 1;
  }

  // How many of the stages from s the model places as `greedy` does, knowing
  // that at least `known` of them are.
  std::size_t agreement(std::size_t s, const std::vector<std::size_t>& greedy,
                        std::size_t known) const {
    while (known < greedy.size() && chosen(s + known) == greedy[known]) ++known;
    return known;
  }

  // The length of the shortest prefix of the assumed first fit that the last
  // unsat core lies within: that prefix fails too.
  std::size_t lastInCore(std::size_t s, const std::vector<std::size_t>& greedy) {
    z3::expr_vector core = solver_.unsat_core();
    std::size_t last = 0;
    for (std::size_t k = 0; k < greedy.size(); ++k)
      for (unsigned c = 0; c < core.size(); ++c)
        if (z3::eq(core[c], choices_[s + k][unsigned(greedy[k])])) last = k + 1;
    return last;
  }

  // Stage s's least start at index `lo` or later, the earlier stages fixed:
  // bisect between the lowest free start and the model's, each probe asking for
  // a start in the lower half under a guard literal, so the solver keeps what it
  // learnt.
  void fixLeastStart(std::size_t s, std::size_t lo) {
    std::size_t current = chosen(s);
    lo = firstFreeStart(s, lo);
    for (bool first = true; lo < current; first = false) {
      std::size_t mid = first ? lo : lo + (current - lo) / 2;
      z3::expr_vector earlier(ctx_);
      for (std::size_t i = lo; i <= mid; ++i) earlier.push_back(choices_[s][unsigned(i)]);
      z3::expr guard = fresh(fmt::format("stage{}<={}", s, starts_[s][mid]));
      solver_.add(z3::implies(guard, z3::mk_or(earlier)));
      if (check(guard)) {
        current = chosen(s);
      } else {
        lo = mid + 1;
      }
    }
    fix(s, current);
  }

  const ir::Cluster& cluster_;
  const PlacementRequest& request_;
  int perNode_, block_;
  int forced_ = 0;
  std::set<int> excluded_;
  std::vector<bool> used_;          // devices fixed stages or exclusions take
  std::vector<std::size_t> fixed_;  // fixed_[s]: the index of stage s's start
  z3::context ctx_;
  z3::solver solver_;
  z3::model model_;
  std::vector<std::vector<int>> starts_;
  std::vector<z3::expr_vector> choices_, coverOf_, wholeAt_;
  std::vector<std::vector<z3::expr>> inNode_;
  std::map<std::string, z3::expr> disjunctions_;
  z3::expr_vector crossing_;
  z3::expr allExclusions_;
  std::vector<Hint> hints_;
};

}  // namespace

std::vector<int> startsOf(const ir::Cluster& cluster, SubmeshShape shape) {
  int nodes = int(cluster.nodes), perNode = int(cluster.devicesPerNode);
  std::vector<int> starts;
  if (wholeNodes(cluster, shape)) {
    for (int k = 0; k + shape.nodes <= nodes; ++k) starts.push_back(k * perNode);
  } else {
    for (int d = 0; d < nodes * perNode; d += shape.devicesPerNode) starts.push_back(d);
  }
  return starts;
}

int countCrossings(const ir::Cluster& cluster, const std::vector<SubmeshShape>& stages,
                   const std::vector<int>& starts) {
  int crossings = 0;
  for (std::size_t s = 0; s + 1 < stages.size(); ++s)
    crossings += wholeNodes(cluster, stages[s]) || wholeNodes(cluster, stages[s + 1]) ||
                 starts[s] / cluster.devicesPerNode != starts[s + 1] / cluster.devicesPerNode;
  return crossings;
}

int crossingsLowerBound(const ir::Cluster& cluster, const std::vector<SubmeshShape>& stages) {
  int bound = 0;
  std::int64_t runDevices = 0;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    if (s > 0 && (wholeNodes(cluster, stages[s - 1]) || wholeNodes(cluster, stages[s]))) ++bound;
    if (!wholeNodes(cluster, stages[s])) runDevices += stages[s].devices();
    bool runEnds = s + 1 == stages.size() || wholeNodes(cluster, stages[s + 1]);
    if (runEnds && runDevices > 0) {
      bound += int((runDevices + cluster.devicesPerNode - 1) / cluster.devicesPerNode) - 1;
      runDevices = 0;
    }
  }
  return bound;
}

Placement solveExactCover(const ir::Cluster& cluster, const PlacementRequest& request,
                          const Seed& seed) {
  return ExactCover(cluster, request).solve(seed);
}

}  // namespace meshflow::passes::placement
