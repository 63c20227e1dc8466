// Solve times of the intra-op sharding solver on synthetic problems of growing
// size: chains (shrunk away exactly), transformer-like layers (residual adds and
// the q/k/v fan-out leave a core for Z3), and random layered DAGs with arbitrary
// costs (the hard case DESIGN.md measured past a minute on raw Z3).
//
// Usage: bench_sharding_solver [TIME_BUDGET_SECONDS]   (default 10)
//
// Rows with a memory budget exercise the Lagrangian search; a row not proven
// optimal prints the gap to the proven lower bound.
//
// Not yet here: the GPT-39B layer and 48-layer model of issue 4, which need the
// graph IR and per-op strategies to generate their problems.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "passes/ShardingSolver.h"

using meshflow::passes::ShardingEdge;
using meshflow::passes::ShardingError;
using meshflow::passes::ShardingNode;
using meshflow::passes::ShardingProblem;
using meshflow::passes::ShardingSolution;
using meshflow::passes::SolveOptions;
using meshflow::passes::solveSharding;

namespace {

class Generator {
 public:
  explicit Generator(unsigned seed) : rng_(seed) {}

  double uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

  void addNode(ShardingProblem& p, const std::string& name, int strategies) {
    ShardingNode n{name, {}, {}};
    for (int k = 0; k < strategies; ++k) {
      n.costs.push_back(uniform(0, 1));
      n.memory.push_back(uniform(1, 4));
    }
    p.nodes.push_back(n);
  }

  // Resharding-like costs: zero on matching layouts, positive elsewhere, and a few
  // infeasible pairs, as between real sharding specs.
  void addEdge(ShardingProblem& p, int from, int to) {
    ShardingEdge e{from, to, {}};
    size_t rows = p.nodes[from].costs.size(), cols = p.nodes[to].costs.size();
    for (size_t r = 0; r < rows; ++r) {
      std::vector<double> row;
      for (size_t c = 0; c < cols; ++c) {
        double v = r == c ? 0.0 : uniform(0.2, 2.0);
        if (r != c && pick(20) == 0) v = std::numeric_limits<double>::infinity();
        row.push_back(v);
      }
      e.costs.push_back(row);
    }
    p.edges.push_back(e);
  }

 private:
  std::mt19937 rng_;
};

ShardingProblem chain(int n, int strategies, unsigned seed) {
  Generator g(seed);
  ShardingProblem p;
  for (int i = 0; i < n; ++i) {
    g.addNode(p, fmt::format("op{}", i), strategies);
    if (i > 0) g.addEdge(p, i - 1, i);
  }
  return p;
}

// One transformer block is 14 ops: ln1, q, k, v, scores, softmax, context,
// out_proj, add1 (residual), ln2, fc1, gelu, fc2, add2 (residual).
ShardingProblem transformer(int blocks, int strategies, unsigned seed) {
  Generator g(seed);
  ShardingProblem p;
  auto op = [&](const std::string& name) {
    g.addNode(p, name, strategies);
    return static_cast<int>(p.nodes.size()) - 1;
  };
  int x = op("embed");
  for (int b = 0; b < blocks; ++b) {
    auto name = [&](const char* n) { return fmt::format("b{}.{}", b, n); };
    int ln1 = op(name("ln1")), q = op(name("q")), k = op(name("k")), v = op(name("v"));
    int scores = op(name("scores")), softmax = op(name("softmax")), ctx = op(name("context"));
    int out = op(name("out_proj")), add1 = op(name("add1")), ln2 = op(name("ln2"));
    int fc1 = op(name("fc1")), gelu = op(name("gelu")), fc2 = op(name("fc2")),
        add2 = op(name("add2"));
    for (auto [a, c] : std::initializer_list<std::pair<int, int>>{{x, ln1},
                                                                  {ln1, q},
                                                                  {ln1, k},
                                                                  {ln1, v},
                                                                  {q, scores},
                                                                  {k, scores},
                                                                  {scores, softmax},
                                                                  {softmax, ctx},
                                                                  {v, ctx},
                                                                  {ctx, out},
                                                                  {out, add1},
                                                                  {x, add1},
                                                                  {add1, ln2},
                                                                  {ln2, fc1},
                                                                  {fc1, gelu},
                                                                  {gelu, fc2},
                                                                  {fc2, add2},
                                                                  {add1, add2}}) {
      g.addEdge(p, a, c);
    }
    x = add2;
  }
  return p;
}

// Layers of `width` ops, each op fed by two random ops of the previous layer.
ShardingProblem layeredDag(int layers, int width, int strategies, unsigned seed) {
  Generator g(seed);
  ShardingProblem p;
  for (int l = 0; l < layers; ++l) {
    for (int w = 0; w < width; ++w) {
      g.addNode(p, fmt::format("l{}.{}", l, w), strategies);
      if (l == 0) continue;
      int self = static_cast<int>(p.nodes.size()) - 1;
      int a = (l - 1) * width + g.pick(width), b = (l - 1) * width + g.pick(width);
      g.addEdge(p, a, self);
      if (b != a) g.addEdge(p, b, self);
    }
  }
  return p;
}

// A budget between the least and the most memory, so it binds.
void tightBudget(ShardingProblem& p, double fraction) {
  double least = 0.0, most = 0.0;
  for (const ShardingNode& n : p.nodes) {
    least += *std::min_element(n.memory.begin(), n.memory.end());
    most += *std::max_element(n.memory.begin(), n.memory.end());
  }
  p.memoryBudget = least + fraction * (most - least);
}

void run(const std::string& label, ShardingProblem p, const SolveOptions& options) {
  size_t assignments = 0;
  for (const ShardingNode& n : p.nodes) assignments += n.costs.size();
  auto start = std::chrono::steady_clock::now();
  std::string result;
  size_t residual = 0;
  try {
    ShardingSolution s = solveSharding(p, options);
    residual = s.residualNodes;
    result = fmt::format("objective {:10.4f} {}", s.objective,
                         s.optimal ? "optimal" : "NOT proven optimal");
    if (!s.optimal) result += fmt::format(", gap {:.4f}", s.objective - s.lowerBound);
  } catch (const ShardingError& e) {
    result = fmt::format("error: {}", e.what());
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  fmt::print(
      "{:<34} nodes {:5} edges {:5} strategies {:6} residual {:4} memory {:3}  {:8.3f} s  {}\n",
      label, p.nodes.size(), p.edges.size(), assignments, residual, p.memoryBudget ? "yes" : "no",
      seconds, result);
}

ShardingProblem withBudget(ShardingProblem p, double fraction) {
  tightBudget(p, fraction);
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  SolveOptions options;
  if (argc > 1) options.timeBudgetSeconds = std::atof(argv[1]);
  SolveOptions z3Only = options;
  z3Only.searchLimit = 0;
  fmt::print("sharding solver benchmark (time budget {} s)\n", options.timeBudgetSeconds);

  for (int n : {10, 100, 1000, 10000}) run(fmt::format("chain {} x 6", n), chain(n, 6, 1), options);
  for (int blocks : {1, 2, 4}) {
    for (int s : {4, 8}) {
      run(fmt::format("transformer {} block(s) x {}", blocks, s), transformer(blocks, s, 2),
          options);
      run(fmt::format("  same, Z3 only"), transformer(blocks, s, 2), z3Only);
      run(fmt::format("  same, memory budget"), withBudget(transformer(blocks, s, 2), 0.3),
          options);
    }
  }
  // A binding budget between the least and the most memory: `fraction` of the way.
  fmt::print("memory budget = least + fraction x (most - least):\n");
  for (int blocks : {4, 8, 16}) {
    for (double fraction : {0.05, 0.15, 0.3, 0.45}) {
      run(fmt::format("transformer {} x 8, fraction {:.2f}", blocks, fraction),
          withBudget(transformer(blocks, 8, 2), fraction), options);
    }
  }
  for (unsigned seed : {3u, 4u, 5u, 6u}) {
    run(fmt::format("transformer 4 x 8, seed {}, 0.30", seed),
        withBudget(transformer(4, 8, seed), 0.3), options);
  }
  for (int layers : {5, 10, 15}) {
    for (int s : {4, 6, 8}) {
      run(fmt::format("layered {} x 4 x {}", layers, s), layeredDag(layers, 4, s, 3), options);
    }
  }
  // Residual problems left by shrinking make each relaxed problem a search.
  for (int layers : {5, 10, 15}) {
    run(fmt::format("layered {} x 4 x 4, budget 0.3", layers),
        withBudget(layeredDag(layers, 4, 4, 3), 0.3), options);
  }
  return 0;
}
