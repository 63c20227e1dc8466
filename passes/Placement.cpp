#include "passes/Placement.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <z3++.h>

#include <algorithm>
#include <set>

namespace meshflow::passes {
namespace {

// Z3's own randomness is fixed per solver, never through its global parameters,
// so two placements in one process cannot influence each other.
constexpr unsigned kSeed = 0;

struct Hint {
  std::string name;  // how the error message names it
  z3::expr literal;  // the tracked assumption that switches it on
  z3::expr constraint;
};

class PlacementModel {
 public:
  PlacementModel(const ir::Cluster& cluster, const PlacementRequest& request)
      : request_(request), nodes_(cluster.nodes), perNode_(cluster.devicesPerNode) {
    makeVariables();
  }

  Placement solve() {
    std::vector<Hint> hints = makeHints();
    z3::solver solver(ctx_);
    z3::params params(ctx_);
    params.set("random_seed", kSeed);
    solver.set(params);
    for (const z3::expr& c : structure()) solver.add(c);
    z3::expr_vector assumptions(ctx_);
    for (const Hint& h : hints) {
      solver.add(z3::implies(h.literal, h.constraint));
      assumptions.push_back(h.literal);
    }
    if (solver.check(assumptions) != z3::sat) throw PlacementError(conflictMessage(solver, hints));
    return optimize(solver, hints);
  }

 private:
  bool wholeNodes(const SubmeshShape& s) const { return s.devicesPerNode == perNode_; }

  z3::expr start(std::size_t s) const { return starts_[s]; }
  z3::expr end(std::size_t s) const {
    return starts_[s] + ctx_.int_val(request_.stages[s].devices());
  }

  // Per stage a node and a slot within it; the stage's ids are one range from
  // start = node·M + slot·m.
  void makeVariables() {
    for (std::size_t s = 0; s < request_.stages.size(); ++s) {
      nodeOf_.push_back(ctx_.int_const(fmt::format("node{}", s).c_str()));
      slots_.push_back(ctx_.int_const(fmt::format("slot{}", s).c_str()));
      int m = request_.stages[s].devicesPerNode;
      starts_.push_back(nodeOf_[s] * int(perNode_) + slots_[s] * m);
    }
  }

  // The variables' ranges, and pairwise disjoint ranges of ids.
  std::vector<z3::expr> structure() const {
    std::vector<z3::expr> out;
    const auto& stages = request_.stages;
    for (std::size_t s = 0; s < stages.size(); ++s) {
      bool whole = wholeNodes(stages[s]);
      int lastNode = whole ? int(nodes_) - stages[s].nodes : int(nodes_) - 1;
      int slots = whole ? 1 : int(perNode_) / stages[s].devicesPerNode;
      out.push_back(nodeOf_[s] >= 0 && nodeOf_[s] <= lastNode && slots_[s] >= 0 &&
                    slots_[s] < slots);
    }
    for (std::size_t a = 0; a < stages.size(); ++a)
      for (std::size_t b = a + 1; b < stages.size(); ++b)
        out.push_back(end(a) <= start(b) || end(b) <= start(a));
    return out;
  }

  std::vector<Hint> makeHints() {
    std::vector<Hint> hints;
    for (std::size_t i = 0; i < request_.pins.size(); ++i) {
      const PlacementPin& pin = request_.pins[i];
      z3::expr all = ctx_.bool_val(true);
      for (int d : pin.devices)
        all = all && start(pin.stage) <= d && ctx_.int_val(d) < end(pin.stage);
      hints.push_back(
          {fmt::format("pin of stage {} on devices [{}]", pin.stage, fmt::join(pin.devices, ", ")),
           ctx_.bool_const(fmt::format("pin{}", i).c_str()), all});
    }
    for (std::size_t i = 0; i < request_.excluded.size(); ++i) {
      int device = request_.excluded[i];
      z3::expr all = ctx_.bool_val(true);
      for (std::size_t s = 0; s < request_.stages.size(); ++s)
        all = all && (ctx_.int_val(device) < start(s) || end(s) <= device);
      hints.push_back({fmt::format("exclusion of device {}", device),
                       ctx_.bool_const(fmt::format("exclude{}", i).c_str()), all});
    }
    return hints;
  }

  // A minimal set of hints that cannot hold together: Z3's core, shrunk by
  // dropping each member the others still conflict without.
  std::string conflictMessage(z3::solver& solver, const std::vector<Hint>& hints) {
    z3::expr_vector core = solver.unsat_core();
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < hints.size(); ++i)
      for (unsigned c = 0; c < core.size(); ++c)
        if (z3::eq(core[c], hints[i].literal)) members.push_back(i);
    for (std::size_t k = 0; k < members.size();) {
      z3::expr_vector rest(ctx_);
      for (std::size_t j = 0; j < members.size(); ++j)
        if (j != k) rest.push_back(hints[members[j]].literal);
      if (solver.check(rest) == z3::unsat) {
        members.erase(members.begin() + long(k));
      } else {
        ++k;
      }
    }
    if (members.empty())
      return fmt::format("the stage shapes cannot be packed onto the {}x{} cluster", nodes_,
                         perNode_);
    std::vector<std::string> names;
    for (std::size_t i : members) names.push_back(hints[i].name);
    if (names.size() == 1) return fmt::format("no placement honours the {}", names[0]);
    return fmt::format("no placement honours these hints together: {}", fmt::join(names, "; "));
  }

  // Adjacent stages that do not share a node; a whole-node stage shares none.
  z3::expr crossings() const {
    z3::expr sum = ctx_.int_val(0);
    const auto& stages = request_.stages;
    for (std::size_t s = 0; s + 1 < stages.size(); ++s) {
      if (wholeNodes(stages[s]) || wholeNodes(stages[s + 1])) {
        sum = sum + 1;
      } else {
        sum = sum + z3::ite(nodeOf_[s] == nodeOf_[s + 1], ctx_.int_val(0), ctx_.int_val(1));
      }
    }
    return sum;
  }

  // Fewest crossings first, then the lexicographically smallest starts, which
  // pins down a unique answer. Each objective is minimised in turn by binary
  // search over a bound on the solver that proved the hints satisfiable, then
  // fixed: z3::optimize with one objective per stage took minutes at 60 stages,
  // while these checks stay small and incremental.
  Placement optimize(z3::solver& solver, const std::vector<Hint>& hints) {
    for (const Hint& h : hints) solver.add(h.constraint);
    z3::expr crossing = crossings();
    int stages = int(request_.stages.size());
    int fewest = minimise(solver, crossing, 0, std::max(stages - 1, 0));
    solver.add(crossing == fewest);
    Placement placement;
    placement.crossNodeBoundaries = fewest;
    int total = int(nodes_ * perNode_);
    for (int s = 0; s < stages; ++s) {
      int first = minimise(solver, starts_[s], 0, total - 1);
      solver.add(starts_[s] == first);
      std::vector<int> ids(request_.stages[s].devices());
      for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = first + int(i);
      placement.devices.push_back(std::move(ids));
    }
    return placement;
  }

  // The least value of `e` in [lo, hi] the solver's constraints allow; the
  // caller has shown that some value in the range is allowed.
  int minimise(z3::solver& solver, const z3::expr& e, int lo, int hi) {
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      solver.push();
      solver.add(e <= mid);
      bool fits = solver.check() == z3::sat;
      solver.pop();
      if (fits) {
        hi = mid;
      } else {
        lo = mid + 1;
      }
    }
    return lo;
  }

  const PlacementRequest& request_;
  std::int64_t nodes_, perNode_;
  mutable z3::context ctx_;
  std::vector<z3::expr> nodeOf_, slots_, starts_;
};

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
        "the stages' submeshes cover {} devices, but {} are available after {} exclusions; "
        "a placement uses every device that is not excluded (exclude the ones to leave idle)",
        wanted, available, excluded.size()));
  if (wanted > available)
    throw PlacementError(fmt::format(
        "the stages' submeshes need {} devices, but only {} are available after {} exclusions",
        wanted, available, excluded.size()));
}

}  // namespace

Placement placeStages(const ir::Cluster& cluster, const PlacementRequest& request) {
  validate(cluster, request);
  return PlacementModel(cluster, request).solve();
}

}  // namespace meshflow::passes
