// Problems and an independent brute force for the sharding solver's tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/ShardingFamilies.h"
#include "passes/ShardingSolver.h"

namespace meshflow::test {

using passes::ShardingEdge;
using passes::ShardingNode;
using passes::ShardingProblem;

inline constexpr double kInf = std::numeric_limits<double>::infinity();

inline double memoryOf(const ShardingProblem& p, const std::vector<int>& c) {
  double memory = 0.0;
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    if (!p.nodes[i].memory.empty()) memory += p.nodes[i].memory[c[i]];
  }
  return memory;
}

// The objective of a full assignment, computed independently of the solver.
/// Costs rounded to halves: many equal optima, so the canonical form matters.
inline ShardingProblem withTies(ShardingProblem p) {
  for (auto& n : p.nodes)
    for (double& c : n.costs) c = std::round(2 * c) / 2;
  for (auto& e : p.edges)
    for (auto& row : e.costs)
      for (double& c : row) c = std::isfinite(c) ? std::round(2 * c) / 2 : c;
  return p;
}

/// The same choices with memory as their cost (edges free unless infinite):
/// its optimum is the least memory of any choice that avoids infinite edges.
inline ShardingProblem memoryAsCost(const ShardingProblem& p) {
  ShardingProblem memory = p;
  for (auto& n : memory.nodes) n.costs = n.memory;
  for (auto& e : memory.edges)
    for (auto& row : e.costs)
      for (double& c : row) c = std::isfinite(c) ? 0.0 : c;
  return memory;
}

inline double evaluate(const ShardingProblem& p, const std::vector<int>& c) {
  double total = 0.0;
  for (size_t i = 0; i < p.nodes.size(); ++i) total += p.nodes[i].costs[c[i]];
  for (const ShardingEdge& e : p.edges) total += e.costs[c[e.from]][c[e.to]];
  if (p.memoryBudget && memoryOf(p, c) > *p.memoryBudget + 1e-9) return kInf;
  return total;
}

struct BruteForce {
  double optimum = kInf;
  std::vector<int> smallest;  ///< The lexicographically smallest optimal choice.
};

// Exhaustive search: the optimum and the lexicographically smallest choice within
// the solver's tolerance of it (relative 1e-9), or nothing when nothing is feasible.
inline std::optional<BruteForce> bruteForce(const ShardingProblem& p) {
  std::vector<std::vector<int>> all;
  std::vector<double> values;
  std::vector<int> c(p.nodes.size(), 0);
  while (true) {
    all.push_back(c);
    values.push_back(evaluate(p, c));
    size_t i = 0;
    while (i < c.size() && ++c[i] == static_cast<int>(p.nodes[i].costs.size())) c[i++] = 0;
    if (i == c.size()) break;
  }
  BruteForce out;
  out.optimum = *std::min_element(values.begin(), values.end());
  if (std::isinf(out.optimum)) return std::nullopt;
  double cap = out.optimum + 1e-9 * std::max(1.0, std::fabs(out.optimum));
  for (size_t j = 0; j < all.size(); ++j) {
    if (values[j] <= cap && (out.smallest.empty() || all[j] < out.smallest)) out.smallest = all[j];
  }
  return out;
}

enum class Budget { kSometimes, kAlways };

// Random problems of at most 8 nodes and 4 strategies, with random edges (some
// parallel, some self-loops), some infinite entries and a memory budget
// sometimes or always. Integer costs (half of the problems) make ties, which
// test the canonical form.
inline ShardingProblem randomProblem(unsigned seed, Budget budget = Budget::kSometimes) {
  std::mt19937 rng(seed);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto real = [&] { return std::uniform_real_distribution<double>(0.0, 10.0)(rng); };
  bool integral = uniform(0, 1) == 0;
  auto value = [&] { return integral ? double(uniform(0, 5)) : real(); };
  ShardingProblem p;
  int n = uniform(1, 8);
  bool withMemory = uniform(0, 2) == 0 || budget == Budget::kAlways;
  double memoryLeast = 0.0, memoryMost = 0.0;
  for (int i = 0; i < n; ++i) {
    ShardingNode node{"n" + std::to_string(i), {}, {}};
    int s = uniform(1, 4);
    for (int k = 0; k < s; ++k) {
      node.costs.push_back(value());
      if (withMemory) node.memory.push_back(double(uniform(0, 6)));
    }
    if (withMemory) {
      memoryLeast += *std::min_element(node.memory.begin(), node.memory.end());
      memoryMost += *std::max_element(node.memory.begin(), node.memory.end());
    }
    p.nodes.push_back(node);
  }
  int edges = uniform(0, 2 * n);
  int infPercent = uniform(0, 25);
  for (int e = 0; e < edges; ++e) {
    ShardingEdge edge{uniform(0, n - 1), uniform(0, n - 1), {}};
    for (size_t r = 0; r < p.nodes[edge.from].costs.size(); ++r) {
      std::vector<double> row;
      for (size_t c = 0; c < p.nodes[edge.to].costs.size(); ++c) {
        row.push_back(uniform(0, 99) < infPercent ? kInf : value());
      }
      edge.costs.push_back(row);
    }
    p.edges.push_back(edge);
  }
  if (budget == Budget::kAlways) {
    // Between the least and the most memory, so that it usually binds.
    p.memoryBudget = std::floor(memoryLeast + (memoryMost - memoryLeast) * uniform(0, 100) / 100.0);
  } else if (withMemory) {
    p.memoryBudget = std::floor(memoryMost * uniform(30, 100) / 100.0);
  }
  return p;
}

// The same problem written differently: edges in another order, some reversed
// (matrix transposed), some split into two parallel edges whose costs add up.
inline ShardingProblem rewritten(const ShardingProblem& p, unsigned seed) {
  std::mt19937 rng(seed);
  ShardingProblem q = p;
  q.edges.clear();
  for (const ShardingEdge& e : p.edges) {
    ShardingEdge copy = e;
    if (e.from != e.to && rng() % 2 == 0) {
      copy = {e.to, e.from, {}};
      copy.costs.assign(e.costs[0].size(), std::vector<double>(e.costs.size()));
      for (size_t r = 0; r < e.costs.size(); ++r) {
        for (size_t c = 0; c < e.costs[r].size(); ++c) copy.costs[c][r] = e.costs[r][c];
      }
    }
    if (rng() % 4 == 0) {
      // Halving is exact for doubles, so the two halves add up to the original.
      ShardingEdge half = copy;
      for (auto& row : half.costs) {
        for (double& v : row) v = std::isfinite(v) ? v / 2 : v;
      }
      q.edges.push_back(half);
      q.edges.push_back(half);
    } else {
      q.edges.push_back(copy);
    }
  }
  std::shuffle(q.edges.begin(), q.edges.end(), rng);
  return q;
}

// A stack of transformer blocks of 14 ops each (ln1, q, k, v, scores, softmax,
// context, out_proj, residual add, ln2, fc1, gelu, fc2, residual add), as in
// bench/bench_sharding_solver.cpp but drawn from raw std::mt19937 output, which
// the standard fixes, so the problem (and its optimum) is the same everywhere.
// Resharding-like edges: zero on matching strategies, positive elsewhere, and
// one pair in 20 infeasible. The budget is `fraction` of the way from the least
// to the most memory.
inline ShardingProblem transformerProblem(int blocks, int strategies, unsigned seed,
                                          double fraction) {
  std::mt19937 rng(seed);
  auto unit = [&] { return rng() / 4294967296.0; };
  ShardingProblem p;
  auto op = [&](int b, const char* name) {
    ShardingNode n{"b" + std::to_string(b) + "." + name, {}, {}};
    for (int k = 0; k < strategies; ++k) {
      n.costs.push_back(unit());
      n.memory.push_back(1 + 3 * unit());
    }
    p.nodes.push_back(n);
    return static_cast<int>(p.nodes.size()) - 1;
  };
  auto edge = [&](int from, int to) {
    ShardingEdge e{from, to, {}};
    for (int r = 0; r < strategies; ++r) {
      std::vector<double> row;
      for (int c = 0; c < strategies; ++c) {
        double v = r == c ? 0.0 : 0.2 + 1.8 * unit();
        if (r != c && rng() % 20 == 0) v = kInf;
        row.push_back(v);
      }
      e.costs.push_back(row);
    }
    p.edges.push_back(e);
  };
  int x = op(-1, "embed");
  for (int b = 0; b < blocks; ++b) {
    int ln1 = op(b, "ln1"), q = op(b, "q"), k = op(b, "k"), v = op(b, "v");
    int scores = op(b, "scores"), softmax = op(b, "softmax"), ctx = op(b, "context");
    int out = op(b, "out_proj"), add1 = op(b, "add1"), ln2 = op(b, "ln2");
    int fc1 = op(b, "fc1"), gelu = op(b, "gelu"), fc2 = op(b, "fc2"), add2 = op(b, "add2");
    const std::pair<int, int> links[] = {
        {x, ln1},          {ln1, q},       {ln1, k},    {ln1, v},    {q, scores}, {k, scores},
        {scores, softmax}, {softmax, ctx}, {v, ctx},    {ctx, out},  {out, add1}, {x, add1},
        {add1, ln2},       {ln2, fc1},     {fc1, gelu}, {gelu, fc2}, {fc2, add2}, {add1, add2}};
    for (auto [from, to] : links) edge(from, to);
    x = add2;
  }
  return families::withBudget(std::move(p), fraction);
}

}  // namespace meshflow::test
