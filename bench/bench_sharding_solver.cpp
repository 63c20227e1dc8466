// The intra-op sharding solver against Alpa's own ILP solved by COIN-OR CBC, on
// the planner's own problems (the intra-op pass on GPT layers and whole GPT
// models of Alpa's suite, as the planner poses them: repeated layers tied) and
// families of synthetic problems (bench/ShardingFamilies.h): transformer blocks,
// random DAGs (10–200 ops, 2–16 strategies), layered DAGs and wide DAGs, each
// without and with a binding memory budget. Both run in the same process on the
// same problem, one after the other, under the same time budget.
//
// Usage: bench_sharding_solver [TIME_BUDGET_SECONDS] [FAMILY...]   (default 10, all)
// A FAMILY argument may name one case, `FAMILY:LABEL` (e.g.
// "random:100 ops x 2..16 budget").
//
// Per case: each solver's time, objective and whether it proved it optimal (for
// meshflow, the gap to its proven bound when not). Per family: how many cases
// CBC proved, how many of those meshflow proved too, equal / better / worse
// answers, and the median times with their ratio (CBC / meshflow). The chain rows
// first show that shrinking alone solves long chains.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench/ShardingFamilies.h"
#include "ir/Cluster.h"
#include "passes/IntraOpPass.h"
#include "passes/ShardingReferenceIlp.h"
#include "passes/ShardingSolver.h"
#include "tests/unit/graph/GraphBuilder.h"

using namespace meshflow;
using passes::ShardingProblem;

namespace {

struct Case {
  std::string family;
  std::string label;
  ShardingProblem problem;
};

void addBoth(std::vector<Case>& cases, const std::string& family, const std::string& label,
             const ShardingProblem& p) {
  cases.push_back({family, label, p});
  cases.push_back({family, label + " budget", families::withBudget(p, 0.3)});
}

// The problem the intra-op pass poses for `graph` on a logical mesh of
// p3.16xlarge-like devices (microbatch 8), as the planner solves it.
ShardingProblem plannerProblem(const ir::Graph& graph, std::array<std::int64_t, 2> submesh,
                               std::array<std::int64_t, 2> view) {
  ir::Cluster cluster = ir::p3_16xlarge(2);
  ir::LogicalMesh mesh = ir::logicalMesh(cluster, submesh, view);
  ShardingProblem problem;
  passes::IntraOpOptions options;
  options.batch = 8;
  options.solver.timeBudgetSeconds = 1;  // the solve itself is not what is measured here
  options.problemOut = &problem;
  passes::solveIntraOp(graph, mesh, cluster.device, options);
  return problem;
}

// The planner's problem, and the same under a budget that binds: halfway from
// the leanest memory to that of the unbounded optimum (none when the optimum is
// the leanest already: no budget can bind).
void addPlanner(std::vector<Case>& cases, const std::string& label, const ShardingProblem& p) {
  cases.push_back({"planner-gpt", label, p});
  passes::SolveOptions options;
  const passes::ShardingSolution free = passes::solveSharding(p, options);
  double least = 0.0, chosen = 0.0;
  for (std::size_t i = 0; i < p.nodes.size(); ++i) {
    least += *std::min_element(p.nodes[i].memory.begin(), p.nodes[i].memory.end());
    chosen += p.nodes[i].memory[static_cast<std::size_t>(free.choice[i])];
  }
  if (chosen <= least * (1 + 1e-9)) return;
  ShardingProblem bounded = p;
  bounded.memoryBudget = least + 0.5 * (chosen - least);
  cases.push_back({"planner-gpt", label + " budget", bounded});
}

void addPlannerCases(std::vector<Case>& cases) {
  struct Model {
    const char* name;
    test::GptConfig config;
  };
  const Model models[] = {{"GPT-1.3B", {24, 2048, 32, 1024, 51200}},
                          {"GPT-6.7B", {32, 4096, 32, 1024, 51200}},
                          {"GPT-39B", {48, 8192, 64, 1024, 51200}}};
  using Mesh = std::array<std::int64_t, 2>;
  const std::pair<Mesh, Mesh> meshes[] = {{{1, 8}, {1, 8}}, {{1, 8}, {2, 4}}, {{2, 4}, {2, 4}}, {{1, 4}, {1, 4}}};
  for (const Model& m : models) {
    test::GptConfig layer = m.config;
    layer.layers = 1;
    const ir::Graph one = test::buildGpt(layer), all = test::buildGpt(m.config);
    for (const auto& [submesh, view] : meshes) {
      const std::string mesh = fmt::format("({},{}) as ({},{})", submesh[0], submesh[1], view[0], view[1]);
      addPlanner(cases, fmt::format("{} layer {}", m.name, mesh), plannerProblem(one, submesh, view));
      addPlanner(cases, fmt::format("{} model {}", m.name, mesh), plannerProblem(all, submesh, view));
    }
  }
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  addPlannerCases(cases);
  for (int blocks : {1, 2, 4, 8}) {
    for (int s : {4, 8}) {
      addBoth(cases, "transformer", fmt::format("{} blocks x {}", blocks, s),
              families::transformer(blocks, s, 2));
    }
  }
  for (int ops : {10, 25, 50, 100, 200}) {
    for (int hi : {4, 8, 16}) {
      addBoth(cases, "random", fmt::format("{} ops x 2..{}", ops, hi),
              families::randomDag(ops, 2, hi, 11 + ops + hi));
    }
  }
  for (int layers : {5, 10, 15, 25, 50}) {
    for (int s : {4, 8}) {
      addBoth(cases, "layered", fmt::format("{} x 4 x {}", layers, s),
              families::layeredDag(layers, 4, s, 3 + layers));
    }
  }
  for (int width : {4, 8}) {
    for (int length : {5, 10, 20}) {
      for (int s : {4, 8}) {
        addBoth(cases, "wide", fmt::format("{} x {} x {}", width, length, s),
                families::wideDag(width, length, s, 5 + width * length));
      }
    }
  }
  return cases;
}

struct Outcome {
  double seconds = 0.0;
  std::optional<double> objective;
  bool optimal = false;
  double bound = 0.0;
};

double objectiveOf(const ShardingProblem& p, const std::vector<int>& c) {
  double total = 0.0;
  for (size_t i = 0; i < p.nodes.size(); ++i) total += p.nodes[i].costs[c[i]];
  for (const auto& e : p.edges) total += e.costs[c[e.from]][c[e.to]];
  return total;
}

template <typename Solve>
Outcome timed(Solve solve) {
  auto start = std::chrono::steady_clock::now();
  Outcome o = solve();
  o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return o;
}

Outcome runMeshflow(const ShardingProblem& p, const passes::SolveOptions& options) {
  return timed([&] {
    Outcome o;
    try {
      passes::ShardingSolution s = passes::solveSharding(p, options);
      o.objective = s.objective;
      o.optimal = s.optimal;
      o.bound = s.lowerBound;
    } catch (const passes::ShardingError&) {
    }
    return o;
  });
}

Outcome runCbc(const ShardingProblem& p, double seconds) {
  return timed([&] {
    Outcome o;
    passes::ReferenceIlpResult r = passes::solveReferenceIlp(p, seconds);
    if (r.choice) o.objective = objectiveOf(p, *r.choice);
    o.optimal = r.optimal;
    o.bound = r.bound;
    return o;
  });
}

enum class Verdict { kEqual, kBetter, kWorse, kNoAnswer, kBothFail, kOnlyMeshflow };

Verdict compare(const Outcome& m, const Outcome& c) {
  if (!m.objective) return c.objective ? Verdict::kNoAnswer : Verdict::kBothFail;
  if (!c.objective) return Verdict::kOnlyMeshflow;
  double slack = 1e-6 * std::max(1.0, std::fabs(*c.objective));
  if (std::fabs(*m.objective - *c.objective) <= slack) return Verdict::kEqual;
  return *m.objective < *c.objective ? Verdict::kBetter : Verdict::kWorse;
}

const char* verdictName(Verdict v) {
  switch (v) {
    case Verdict::kEqual:
      return "equal";
    case Verdict::kBetter:
      return "meshflow better";
    case Verdict::kWorse:
      return "MESHFLOW WORSE";
    case Verdict::kNoAnswer:
      return "MESHFLOW NO ANSWER";
    case Verdict::kBothFail:
      return "both without answer";
    case Verdict::kOnlyMeshflow:
      return "CBC no answer";
  }
  return "";
}

std::string describe(const Outcome& o, bool withGap) {
  if (!o.objective) return fmt::format("{:7.3f} s  no answer", o.seconds);
  std::string s =
      fmt::format("{:7.3f} s {:10.4f} {}", o.seconds, *o.objective, o.optimal ? "opt" : "   ");
  if (withGap && !o.optimal && *o.objective > 0) {
    s += fmt::format(" gap {:.1f}%", 100 * (*o.objective - o.bound) / *o.objective);
  }
  return s;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Tally {
  int cases = 0, cbcProven = 0, sameProven = 0, meshflowProven = 0;
  int counts[6] = {};
  std::vector<double> meshflowSeconds, cbcSeconds;

  void add(const Outcome& m, const Outcome& c, Verdict v) {
    ++cases;
    cbcProven += c.optimal;
    meshflowProven += m.optimal;
    sameProven += c.optimal && m.optimal && v == Verdict::kEqual;
    ++counts[static_cast<int>(v)];
    meshflowSeconds.push_back(m.seconds);
    cbcSeconds.push_back(c.seconds);
  }
};

void printSummary(const std::vector<std::string>& order, const std::vector<Tally>& tallies) {
  fmt::print(
      "\n| family | cases | CBC proved | meshflow proved the same | meshflow proved | equal | "
      "meshflow better | meshflow worse | meshflow no answer | median meshflow | median CBC | "
      "CBC / meshflow |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (size_t f = 0; f < order.size(); ++f) {
    const Tally& t = tallies[f];
    double m = median(t.meshflowSeconds), c = median(t.cbcSeconds);
    fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.3f} s | {:.3f} s | {:.1f}x |\n",
               order[f], t.cases, t.cbcProven, t.sameProven, t.meshflowProven,
               t.counts[int(Verdict::kEqual)], t.counts[int(Verdict::kBetter)],
               t.counts[int(Verdict::kWorse)], t.counts[int(Verdict::kNoAnswer)], m, c,
               m > 0 ? c / m : 0.0);
  }
}

void chains(const passes::SolveOptions& options) {
  for (int n : {100, 1000, 10000}) {
    families::Draw d(1);
    ShardingProblem p;
    for (int i = 0; i < n; ++i) {
      d.node(p, "op" + std::to_string(i), 6);
      if (i > 0) d.edge(p, i - 1, i);
    }
    Outcome m = runMeshflow(p, options);
    fmt::print("chain {:5} x 6: meshflow {}\n", n, describe(m, true));
  }
}

}  // namespace

int main(int argc, char** argv) {
  passes::SolveOptions options;
  if (argc > 1) options.timeBudgetSeconds = std::atof(argv[1]);
  std::vector<std::string> wanted(argv + std::min(argc, 2), argv + argc);
  fmt::print("sharding solver vs Alpa's ILP on CBC (time budget {} s each)\n",
             options.timeBudgetSeconds);
  if (wanted.empty()) chains(options);
  std::vector<std::string> order;
  std::vector<Tally> tallies;
  for (const Case& c : allCases()) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), c.family) == wanted.end() &&
        std::find(wanted.begin(), wanted.end(), c.family + ":" + c.label) == wanted.end()) {
      continue;
    }
    auto it = std::find(order.begin(), order.end(), c.family);
    if (it == order.end()) {
      order.push_back(c.family);
      tallies.emplace_back();
      it = order.end() - 1;
    }
    Outcome m = runMeshflow(c.problem, options);
    Outcome cbc = runCbc(c.problem, options.timeBudgetSeconds);
    Verdict v = compare(m, cbc);
    tallies[it - order.begin()].add(m, cbc, v);
    fmt::print("{:<12} {:<22} nodes {:4} edges {:4} | meshflow {:<36} | CBC {:<28} | {}\n",
               c.family, c.label, c.problem.nodes.size(), c.problem.edges.size(), describe(m, true),
               describe(cbc, false), verdictName(v));
    std::fflush(stdout);
  }
  printSummary(order, tallies);
  return 0;
}
