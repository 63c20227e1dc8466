#include "passes/ShardingSolver.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>

#include "passes/ShardingCanonical.h"
#include "passes/ShardingEvaluator.h"
#include "passes/ShardingLagrangian.h"
#include "passes/ShardingMilp.h"
#include "passes/ShardingNeighbourhood.h"
#include "passes/ShardingRace.h"
#include "passes/ShardingValidation.h"

namespace meshflow::passes {

namespace {

using namespace sharding;

// The search steps the canonical form may spend (queries and min-marginals of a
// residual problem). It is a fixed count, not SolveOptions::searchLimit, so that
// how an optimum was found never changes which one is printed.
constexpr uint64_t kCanonicalSteps = 10000000;

// Without a budget, when the branch and bound did not settle the residual
// within its steps (CBC proved the optimum), the residual usually cannot be
// enumerated either: the canonical form gets this many steps. Whether the
// search settled is a matter of its step count, so this too is deterministic.
constexpr uint64_t kCanonicalFloor = 200000;

// Under a memory budget a query of the canonical form can cost as much as the
// proof of optimality itself, and a problem with many tied optima asks many.
// Each phase of the canonical form (the bounds, the lexicographic search, the
// witness) may spend this many steps: a fixed count, so that whichever engine
// proved the optimum first, the same phases complete.
constexpr uint64_t kCanonicalBudgeted = 2000000;

// The Lagrangian search under a memory budget may spend this many times
// SolveOptions::searchLimit steps in all (each relaxed problem at most
// searchLimit): it solves many relaxed problems, each usually a fold alone.
constexpr uint64_t kLagrangianSearches = 100;

// Once CBC races it, the Lagrangian search stops after this many times
// SolveOptions::searchLimit steps and leaves the processor to CBC: on the
// planner's problems its proofs took at most 3.5·10⁶ steps, and where it had
// not closed the gap by 1.4·10⁷ it did not close it at all in 10 s, while
// sharing the processor slowed CBC (GPT-1.3B layer on (2,4) under a budget:
// 5.6 s alone, unproven in 10 s beside the full search, load 8; with this cap
// at 10, GPT-1.3B's model on (1,8) as (2,4) was still unproven in 10 s under
// load 11, where CBC alone proved it in 4.4 s).
constexpr uint64_t kRacingSearches = 5;

// A residual this small (a GPT's quotient problem leaves 4 nodes) keeps every
// relaxed problem cheap, so the Lagrangian search keeps its full step budget:
// measured on the 48-layer GPT-39B under budgets, it proves optima in 0.5–3 s
// that CBC did not prove in 10 s.
constexpr size_t kSmallResidual = 8;

// ---------------------------------------------------------------------------
// Memory: a node whose memory is the same for every strategy is a constant; a
// strategy that cannot fit even when every other node takes its least memory is
// ruled out; if what is left cannot exceed the budget, the constraint is dropped.

struct MemoryModel {
  bool active = false;
  MemoryBudget budget;         // Every node's memory, the whole budget.
  std::vector<bool> coupled;   // Per node: its choice changes memory.
  double coupledBudget = 0.0;  // What the coupled nodes may use.
};

MemoryModel buildMemoryModel(const ShardingProblem& p, CostGraph& g) {
  MemoryModel mm;
  size_t n = p.nodes.size();
  mm.coupled.assign(n, false);
  if (!p.memoryBudget) return mm;
  std::vector<double> least(n), most(n);
  double leastTotal = 0.0;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> m = p.nodes[i].memory;
    if (m.empty()) m.assign(p.nodes[i].costs.size(), 0.0);
    least[i] = *std::min_element(m.begin(), m.end());
    most[i] = *std::max_element(m.begin(), m.end());
    leastTotal += least[i];
    mm.budget.memory.push_back(std::move(m));
  }
  mm.budget.budget = *p.memoryBudget;
  if (leastTotal > *p.memoryBudget) {
    throw ShardingError(
        fmt::format("infeasible: the memory budget {} is below {}, the sum of "
                    "every node's smallest memory",
                    *p.memoryBudget, leastTotal));
  }
  double worstTotal = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const std::vector<double>& m = mm.budget.memory[i];
    double feasibleMost = 0.0;
    for (size_t k = 0; k < m.size(); ++k) {
      if (leastTotal - least[i] + m[k] > *p.memoryBudget) g.cost[i][k] = kInfinity;
      if (std::isfinite(g.cost[i][k])) feasibleMost = std::max(feasibleMost, m[k]);
    }
    worstTotal += feasibleMost;
  }
  if (worstTotal <= *p.memoryBudget) return mm;
  mm.active = true;
  mm.coupledBudget = *p.memoryBudget;
  for (size_t i = 0; i < n; ++i) {
    mm.coupled[i] = least[i] != most[i];
    if (!mm.coupled[i]) mm.coupledBudget -= least[i];
  }
  return mm;
}

// An answer that no engine proved is polished by re-solving windows of nodes
// (ShardingNeighbourhood) in the last share of the time budget: the engines
// stop this much before the deadline, and the polish has at least this much
// even when CBC overran its own (it looks at its clock between its steps).
// Measured on the synthetic families, the polish takes milliseconds and
// lowers CBC's unproven answers by up to 30%.
constexpr double kPolishShare = 0.02;

// The polish's steps (about 50 ns each): a fixed count, and the deadline.
constexpr uint64_t kPolishSteps = 20000000;

Clock::time_point after(Clock::time_point start, double seconds) {
  return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// ---------------------------------------------------------------------------
// Errors that name what makes a problem infeasible.

ShardingError noStrategy(const ShardingProblem& p, int node, bool budgeted) {
  return ShardingError(
      fmt::format("infeasible: {} has no strategy compatible with its "
                  "neighbours (every choice meets an infinite edge cost{})",
                  nodeLabel(p, node), budgeted ? " or the memory budget" : ""));
}

ShardingError residualInfeasible(const ShardingProblem& p, const std::vector<int>& nodes,
                                 bool budgeted) {
  std::string names;
  for (int n : nodes) {
    names += fmt::format("{}{} '{}'", names.empty() ? "" : ", ", n, p.nodes[n].name);
  }
  return ShardingError(
      fmt::format("infeasible: no choice of strategies for nodes {} avoids every "
                  "infinite edge cost{}",
                  names, budgeted ? " within the memory budget" : ""));
}

ShardingError overBudget(const ShardingProblem& p) {
  return ShardingError(
      fmt::format("infeasible: every choice of strategies that avoids the infinite edge costs "
                  "needs more memory than the budget {}",
                  *p.memoryBudget));
}

// ---------------------------------------------------------------------------
// Solving. Each path returns a choice with whether it is proven optimal.

struct Answer {
  std::optional<std::vector<int>> choice;
  bool optimal = false;
  double lowerBound = -kInfinity;
  size_t residualNodes = 0;
  // The branch and bound did not settle the residual within its steps (CBC's
  // answer or proof was needed): decided by its step count alone.
  bool searchUnsettled = false;
  // CBC, given a cutoff from an answer in hand, proved that nothing is below
  // it (lowerBound): that answer is optimal.
  bool nothingBelowCutoff = false;
};

std::vector<int> fullChoice(const EliminationPlan& plan, const Folded& f, const Residual& r,
                            const std::vector<int>& residualChoice) {
  std::vector<int> choice(f.cost.size(), 0);
  for (size_t i = 0; i < r.nodes.size(); ++i) choice[r.nodes[i]] = residualChoice[i];
  backSubstitute(plan, f, choice);
  return choice;
}

// A lower bound that holds whatever the residual search did: the folded constant
// plus each residual node's least cost (edges cost at least nothing).
double shrinkingLowerBound(const Folded& f, const Residual& r) {
  double bound = f.constant;
  for (const auto& c : r.cost) bound += *std::min_element(c.begin(), c.end());
  return bound;
}

double secondsLeft(Clock::time_point deadline) {
  return std::max(0.001, std::chrono::duration<double>(deadline - Clock::now()).count());
}

// What folding leaves of a problem: the folded part and the residual, whose
// nodes carry their memory when the budget binds.
struct FoldedProblem {
  Folded folded;
  Residual residual;
};

FoldedProblem foldProblem(const ShardingProblem& p, const CostGraph& g,
                          const EliminationPlan& plan, const MemoryModel& mm) {
  FoldedProblem fp{fold(plan, g, g.cost), {}};
  if (fp.folded.infeasibleNode >= 0) {
    throw noStrategy(p, fp.folded.infeasibleNode, p.memoryBudget.has_value());
  }
  fp.residual = buildResidual(plan, fp.folded);
  Residual& r = fp.residual;
  for (size_t i = 0; i < r.nodes.size() && mm.active; ++i) {
    if (mm.coupled[r.nodes[i]]) r.memory[i] = mm.budget.memory[r.nodes[i]];
  }
  r.memoryActive = mm.active;
  r.budget = mm.coupledBudget;
  return fp;
}

Answer answerOf(const ShardingProblem& p, const EliminationPlan& plan, const FoldedProblem& fp,
                const SearchOutcome& s) {
  if (!s.choice) throw residualInfeasible(p, fp.residual.nodes, p.memoryBudget.has_value());
  Answer a;
  a.residualNodes = fp.residual.nodes.size();
  a.lowerBound = shrinkingLowerBound(fp.folded, fp.residual);
  a.choice = fullChoice(plan, fp.folded, fp.residual, *s.choice);
  a.optimal = true;
  return a;
}

Answer answerOf(const ShardingProblem& p, const EliminationPlan& plan, const FoldedProblem& fp,
                const MilpOutcome& milp) {
  if (milp.infeasible) throw residualInfeasible(p, fp.residual.nodes, p.memoryBudget.has_value());
  Answer a;
  a.residualNodes = fp.residual.nodes.size();
  a.lowerBound = std::max(shrinkingLowerBound(fp.folded, fp.residual),
                          fp.folded.constant + milp.bound);
  a.optimal = milp.optimal;
  a.searchUnsettled = true;
  a.nothingBelowCutoff = milp.nothingBelowCutoff;
  if (milp.choice) a.choice = fullChoice(plan, fp.folded, fp.residual, *milp.choice);
  return a;
}

// By default CBC, racing the Lagrangian search, starts after this share of the
// time budget: what the fast path settles at once (every transformer and planner
// problem under a budget but the (2,4) ones, in milliseconds) never starts it.
constexpr double kHeadStart = 0.02;

// Without a budget, CBC starts when the branch and bound has spent this share
// of its steps without settling the residual (then the search starts over,
// with CBC beside it: the first share is done twice).
constexpr uint64_t kQuickShare = 50;

double headStartOf(const SolveOptions& options) {
  return options.raceHeadStartSeconds >= 0 ? options.raceHeadStartSeconds
                                           : kHeadStart * options.timeBudgetSeconds;
}

// Folds what can be folded and hands the rest to CBC until the deadline or
// `stop` (the budgeted race's engine: the Lagrangian search is the branch and
// bound beside it, so CBC starts at once). CBC is given no start: with one it
// skips its root heuristics (the feasibility pump among them), and measured on
// a layered DAG under a budget it then did not improve a poor start (103.7) in
// 10 s, where on its own it found 67.1. It is given the objective of the
// answer in hand (`incumbent`, infinity when none) as its cutoff instead, which
// prunes its tree from the start and keeps its heuristics; the caller keeps the
// better answer.
Answer solveByMilp(const ShardingProblem& p, const CostGraph& g, const EliminationPlan& plan,
                   const MemoryModel& mm, const SolveOptions& options, Clock::time_point deadline,
                   const std::atomic<bool>* stop, double incumbent) {
  FoldedProblem fp = foldProblem(p, g, plan, mm);
  MilpLimits limits{secondsLeft(deadline), options.resourceLimit, stop};
  if (std::isfinite(incumbent)) limits.cutoff = cutoffAbove(incumbent - fp.folded.constant);
  return answerOf(p, plan, fp, solveResidualMilp(fp.residual, limits));
}

// Of two answers that fit, the one with the lower objective; on equal
// objectives the lexicographically smaller choice, whichever engine found it.
bool preferred(const CostGraph& g, const std::vector<int>& x, const std::vector<int>& y) {
  double ox = g.objective(x), oy = g.objective(y);
  return ox < oy || (ox == oy && x < y);
}

bool fitsBudget(const MemoryModel& mm, const std::vector<int>& c) {
  return !mm.active || mm.budget.fits(c);
}

// Merges CBC's answer into the fast path's (not proven): the preferred of the
// two that fit; an optimum CBC proves is the optimum, and so is the answer in
// hand when CBC proved nothing below the cutoff drawn from it.
void mergeMilp(const CostGraph& g, const MemoryModel& mm, const Answer& milp, Answer& a) {
  bool fits = milp.choice && fitsBudget(mm, *milp.choice);
  if (fits && (!a.choice || preferred(g, *milp.choice, *a.choice))) {
    a.choice = milp.choice;
    a.residualNodes = milp.residualNodes;
  }
  // An optimum CBC proves is ours, or no better than ours; an answer of its
  // that misses the budget by rounding proves nothing.
  bool cutoffMet = milp.nothingBelowCutoff && a.choice && fitsBudget(mm, *a.choice) &&
                   g.objective(*a.choice) <= milp.lowerBound;
  a.optimal = (milp.optimal && fits) || cutoffMet;
  a.lowerBound = std::max(a.lowerBound, milp.lowerBound);
}

// The same with CBC racing the branch and bound once the search has not settled
// the residual within a share of its steps (CBC's cutoff: the search's best so
// far): the search's answer when it completes within its steps (CBC is then
// stopped); else CBC's when CBC proves it (or proves nothing below the
// cutoff: then the search's best); else, the deadline having stopped both,
// the preferred of the two. Which one is used depends on the search's step
// count and on what each proved, never on which finished first.
Answer raceFolded(const ShardingProblem& p, const CostGraph& g, const EliminationPlan& plan,
                  const MemoryModel& mm, const SolveOptions& options, Clock::time_point deadline) {
  FoldedProblem fp = foldProblem(p, g, plan, mm);
  SearchOutcome s = searchResidual(fp.residual, options.searchLimit / kQuickShare, kInfinity,
                                   false, deadline);
  if (s.complete) return answerOf(p, plan, fp, s);
  std::optional<MilpOutcome> milp;
  MilpLimits limits{secondsLeft(deadline), options.resourceLimit, nullptr};
  if (s.choice) limits.cutoff = cutoffAbove(s.value);
  RacingEngine cbc(
      [&](const std::atomic<bool>& stop) {
        MilpLimits mine = limits;
        mine.stop = &stop;
        milp = solveResidualMilp(fp.residual, mine);
        return milp->optimal;
      },
      0.0);
  cbc.startNow();
  SearchOutcome quick = std::move(s);
  s = searchResidual(fp.residual, options.searchLimit, kInfinity, false, deadline);
  if (s.complete) return answerOf(p, plan, fp, s);  // Stops CBC.
  cbc.finish();
  Answer a = answerOf(p, plan, fp, *milp);
  if (a.optimal) return a;
  // Neither proved: the better of the two searches' best (the second may have
  // been cut short by the deadline) merged with CBC's.
  if (quick.choice && (!s.choice || quick.value < s.value)) s = std::move(quick);
  Answer searched;
  searched.residualNodes = a.residualNodes;
  searched.lowerBound = shrinkingLowerBound(fp.folded, fp.residual);
  if (s.choice) searched.choice = fullChoice(plan, fp.folded, fp.residual, *s.choice);
  searched.searchUnsettled = true;
  mergeMilp(g, mm, a, searched);
  return searched;
}

// The lexicographically smallest optimum of an unconstrained problem: exact
// min-marginals rule out almost every (node, strategy), the rest are queried.
std::optional<std::vector<int>> canonicalFree(const CostGraph& g, const EliminationPlan& plan,
                                              const std::vector<int>& choice, uint64_t budget,
                                              Clock::time_point deadline) {
  StepBudget steps(budget, deadline);
  double objective = g.objective(choice);
  double cap = objective + tolerance(objective);
  auto bounds = exactMarginals(plan, g, g.cost, cap, steps);
  if (!bounds) return std::nullopt;
  WithinCap query = [&](const std::vector<std::vector<double>>& cost, bool& settled) {
    ExactOutcome r = solveExactly(plan, g, cost, steps.left(), cap, true, deadline);
    steps.spend(plan.foldSteps + r.visits, r.complete);
    settled = r.choice.has_value() || r.complete;
    return r.choice;
  };
  Acceptable acceptable = [&](const std::vector<int>& c) { return g.objective(c) <= cap; };
  return lexicographicallySmallest(g.cost, choice, *bounds, cap, acceptable, query);
}

Answer solveFree(const ShardingProblem& p, const CostGraph& g, const MemoryModel& mm,
                 const SolveOptions& options, Clock::time_point deadline) {
  EliminationPlan plan = planElimination(g, std::vector<bool>(g.nodes(), false));
  Answer a = raceFolded(p, g, plan, mm, options, deadline);
  if (a.optimal) {
    // A residual that the branch and bound could not settle within its steps
    // usually cannot be enumerated either: after CBC, the floor's steps only.
    uint64_t steps = a.searchUnsettled ? kCanonicalFloor : kCanonicalSteps;
    if (auto canonical = canonicalFree(g, plan, *a.choice, steps, deadline)) a.choice = canonical;
  }
  return a;
}

// The problem with memory as the cost and the edges kept only as what they
// allow: its optimum is the least memory any choice needs.
CostGraph memoryProblem(const CostGraph& g, const MemoryModel& mm) {
  CostGraph allowed = g;
  for (CostGraph::Edge& e : allowed.edges) {
    for (double& v : e.cost.values) v = std::isfinite(v) ? 0.0 : kInfinity;
  }
  for (size_t i = 0; i < allowed.cost.size(); ++i) {
    for (size_t k = 0; k < allowed.cost[i].size(); ++k) {
      if (std::isfinite(g.cost[i][k])) allowed.cost[i][k] = mm.budget.memory[i][k];
    }
  }
  return allowed;
}

bool fitting(const CostGraph& g, const MemoryModel& mm, const std::optional<std::vector<int>>& c) {
  return c && mm.budget.fits(*c) && std::isfinite(g.objective(*c));
}

// A choice that fits, whatever it costs, by the search on the memory problem,
// stopping at the first choice within the budget. It runs when the Lagrangian
// search ends without an answer that fits; CBC, racing it on the budgeted
// problem, looks for one too.
std::optional<std::vector<int>> firstFit(const CostGraph& g, const MemoryModel& mm,
                                         const EliminationPlan& plan, uint64_t steps,
                                         Clock::time_point deadline) {
  CostGraph allowed = memoryProblem(g, mm);
  // The search sums memory in its own order: its cap has the tolerance, the
  // answer is then judged exactly.
  double cap = mm.budget.budget + tolerance(mm.budget.budget);
  ExactOutcome r = solveExactly(plan, allowed, allowed.cost, steps, cap, true, deadline);
  return fitting(g, mm, r.choice) ? r.choice : std::nullopt;
}

// When neither the Lagrangian search nor the first-fit search found an answer
// that fits: CBC minimising memory, which always has an answer, with half the
// time left but at least kRescueShare of the time budget. So a binding budget
// does not end without an answer while one exists (as long as this finds it).
constexpr double kRescueShare = 0.1;

// The Lagrangian search stops this share of the time left before the engines'
// deadline (CBC races on to it): when it found no answer that fits, finding
// one (first fit, CBC minimising memory) still has time.
constexpr double kFeasibilityShare = 0.2;

// The point `share` of the way from now to `deadline`.
Clock::time_point shareOf(Clock::time_point deadline, double share) {
  Clock::time_point now = Clock::now();
  if (deadline <= now) return deadline;
  return now + std::chrono::duration_cast<Clock::duration>((deadline - now) * share);
}

std::optional<std::vector<int>> leastMemory(const CostGraph& g, const MemoryModel& mm,
                                            const EliminationPlan& plan,
                                            const SolveOptions& options,
                                            Clock::time_point deadline) {
  CostGraph allowed = memoryProblem(g, mm);
  Folded f = fold(plan, allowed, allowed.cost);
  if (f.infeasibleNode >= 0) return std::nullopt;
  Residual residual = buildResidual(plan, f);
  double seconds = std::max(secondsLeft(deadline) / 2, kRescueShare * options.timeBudgetSeconds);
  MilpOutcome least = solveResidualMilp(residual, {seconds, 0, nullptr});
  if (!least.choice) return std::nullopt;
  std::optional<std::vector<int>> c = fullChoice(plan, f, residual, *least.choice);
  return fitting(g, mm, c) ? c : std::nullopt;
}

// The canonical form of a proven optimum under a budget, from the problem and
// the optimum's objective alone, whichever engine proved it: the
// lexicographically smallest optimum from the answer in hand; if that runs out
// of steps, the same from a witness that only the problem and the cap decide
// (the Lagrangian search's first choice within the cap); if that runs out too,
// the witness itself (solveSharding puts it in local canonical form). Each
// phase has a fixed budget of steps, so how far it gets never depends on the
// solve before it.
void canonicaliseBudgeted(LagrangianSearch& lagrangian, const CostGraph& g, const MemoryModel& mm,
                          Clock::time_point deadline, std::vector<int>& choice) {
  double objective = g.objective(choice);
  double cap = objective + tolerance(objective);
  auto limited = [&](StepBudget& steps) { lagrangian.limit(kCanonicalSteps, steps, deadline); };
  StepBudget boundSteps(kCanonicalBudgeted, deadline);
  limited(boundSteps);
  auto bounds = lagrangian.bounds(cap);
  WithinCap query = [&](const std::vector<std::vector<double>>& cost, bool& settled) {
    return lagrangian.findWithin(cost, cap, settled);
  };
  Acceptable acceptable = [&](const std::vector<int>& c) {
    return g.objective(c) <= cap && mm.budget.fits(c);
  };
  auto smallest = [&](const std::vector<int>& start) -> std::optional<std::vector<int>> {
    if (!bounds) return std::nullopt;
    StepBudget steps(kCanonicalBudgeted, deadline);
    limited(steps);
    return lexicographicallySmallest(g.cost, start, *bounds, cap, acceptable, query);
  };
  if (auto c = smallest(choice)) {
    choice = std::move(*c);
    return;
  }
  StepBudget witnessSteps(kCanonicalBudgeted, deadline);
  limited(witnessSteps);
  bool settled = true;
  std::optional<std::vector<int>> witness = lagrangian.findWithin(g.cost, cap, settled);
  if (!witness) return;  // The engine's own answer (see docs/sharding.md, Determinism).
  std::optional<std::vector<int>> c = smallest(*witness);
  choice = c ? std::move(*c) : std::move(*witness);
}

// The budgeted problem: the Lagrangian search (relaxation and its branch and
// bound) on this thread races CBC on the problem with memory as a constraint
// (the nodes whose memory varies kept), which starts after the head start. The
// first to prove the optimum stops the other; when neither does, both run to
// the deadline and the preferred answer is kept.
Answer solveBudgeted(const ShardingProblem& p, const CostGraph& g, const MemoryModel& mm,
                     const Evaluator& ev, const SolveOptions& options,
                     Clock::time_point deadline) {
  EliminationPlan plan = planElimination(g, std::vector<bool>(g.nodes(), false));
  Folded unconstrained = fold(plan, g, g.cost);
  if (unconstrained.infeasibleNode >= 0) throw noStrategy(p, unconstrained.infeasibleNode, true);
  EliminationPlan kept = planElimination(g, mm.coupled);
  Answer milp;
  // The Lagrangian search's best objective when CBC starts: CBC's cutoff.
  double incumbent = kInfinity;
  RacingEngine cbc(
      [&, cutoff = &incumbent](const std::atomic<bool>& stop) {
        milp = solveByMilp(p, g, kept, mm, options, deadline, &stop, *cutoff);
        return milp.optimal && milp.choice && mm.budget.fits(*milp.choice);
      },
      headStartOf(options));
  // With a larger residual every relaxed problem is a real search, and CBC
  // closes the gap faster than the Lagrangian branch and bound: it gets one
  // search's steps.
  uint64_t searches = plan.residual.size() <= kSmallResidual ? kLagrangianSearches : 1;
  Clock::time_point searchEnd = shareOf(deadline, 1 - kFeasibilityShare);
  StepBudget steps(options.searchLimit > UINT64_MAX / searches ? UINT64_MAX
                                                               : options.searchLimit * searches,
                   searchEnd);
  LagrangianSearch lagrangian(g, mm.budget, plan, options.searchLimit, steps, searchEnd);
  uint64_t racing = std::min(steps.left(), kRacingSearches * options.searchLimit);
  lagrangian.stopWhen([&] {
    // Read by CBC's thread only when this poll starts it (the thread's start
    // orders the write before the read); CBC never reads it again.
    if (!cbc.started()) incumbent = lagrangian.upper();
    return cbc.poll() || (cbc.started() && steps.used() >= racing);
  });
  BudgetedOutcome out = lagrangian.minimise();
  Answer a;
  a.residualNodes = plan.residual.size();
  if (out.infeasible) {
    cbc.stop();
    ExactOutcome free = solveExactly(plan, g, g.cost, kCanonicalSteps, kInfinity, false, deadline);
    if (free.complete && !free.choice) throw residualInfeasible(p, plan.residual, true);
    throw overBudget(p);
  }
  a.choice = out.choice;
  a.optimal = out.optimal;
  a.lowerBound = out.lower;
  if (a.optimal) {
    cbc.stop();
  } else {
    if (!cbc.started()) incumbent = out.upper;
    cbc.startNow();
    if (!a.choice && !cbc.proved()) {
      a.choice = firstFit(g, mm, plan, options.searchLimit, deadline);
    }
    std::exception_ptr milpError;
    // With no answer that fits in hand, finding one comes first: CBC on the
    // budgeted problem is stopped (keeping what it found), CBC minimises
    // memory, then CBC on the budgeted problem gets the rest of the time.
    bool rescue = !a.choice && !cbc.proved();
    if (rescue) cbc.stop();
    try {
      cbc.finish();
      mergeMilp(g, mm, milp, a);
    } catch (const ShardingError&) {
      // The residual sums memory in another order; with an answer that fits in
      // hand (or found next), a verdict of infeasible can only be rounding.
      milpError = std::current_exception();
    }
    if (rescue) {
      if (!a.choice) a.choice = leastMemory(g, mm, plan, options, deadline);
      try {
        if (a.choice) {
          mergeMilp(g, mm,
                    solveByMilp(p, g, kept, mm, options, deadline, nullptr, g.objective(*a.choice)),
                    a);
        }
      } catch (const ShardingError&) {
        // Rounding, as above: an answer that fits is in hand.
      }
    }
    if (!a.choice && milpError) std::rethrow_exception(milpError);
    if (a.choice && !a.optimal) ev.improveLocally(*a.choice);
  }
  if (a.optimal) canonicaliseBudgeted(lagrangian, g, mm, deadline, *a.choice);
  return a;
}

}  // namespace

ShardingSolution solveSharding(const ShardingProblem& problem, const SolveOptions& options) {
  Clock::time_point start = Clock::now();
  Clock::time_point deadline = after(start, options.timeBudgetSeconds);
  Clock::time_point engines = after(start, options.timeBudgetSeconds * (1 - kPolishShare));
  validateProblem(problem);
  CostGraph graph = buildCostGraph(problem);
  MemoryModel memory = buildMemoryModel(problem, graph);
  Evaluator ev(problem);
  Answer a = memory.active ? solveBudgeted(problem, graph, memory, ev, options, engines)
                           : solveFree(problem, graph, memory, options, engines);
  ShardingSolution solution;
  solution.residualNodes = a.residualNodes;
  solution.optimal = a.optimal;
  if (!a.optimal) {
    // The search stopped early; its answer may be missing or may not even
    // satisfy the constraints, so keep whichever of it and a local search is
    // better, in its local canonical form.
    std::optional<std::vector<int>> local = ev.localSearch();
    double found = a.choice ? ev.objective(*a.choice) : kInfinity;
    if (local && ev.objective(*local) < found) a.choice = local;
    if (!a.choice || !std::isfinite(ev.objective(*a.choice))) {
      throw ShardingError(fmt::format(
          "no feasible assignment found within the time budget of {} s ({} nodes left after "
          "shrinking); infeasibility not proven",
          options.timeBudgetSeconds, a.residualNodes));
    }
    StepBudget steps(kPolishSteps,
                     std::max(deadline, after(Clock::now(), kPolishShare * options.timeBudgetSeconds)));
    improveByWindows(graph, memory.active ? &memory.budget : nullptr, *a.choice, steps);
  }
  // A no-op on a lexicographically smallest optimum; otherwise (not proven, or
  // its lexicographic form ran out of steps) the local canonical form.
  ev.canonicaliseLocally(*a.choice);
  solution.choice = std::move(*a.choice);
  solution.objective = ev.objective(solution.choice);
  if (!std::isfinite(solution.objective)) {
    throw ShardingError("internal error: the solver's answer breaks a constraint");
  }
  // Costs are non-negative, so 0 bounds every objective.
  solution.lowerBound =
      a.optimal ? solution.objective : std::clamp(a.lowerBound, 0.0, solution.objective);
  solution.alternatives = ev.alternatives(solution.choice);
  return solution;
}

}  // namespace meshflow::passes
