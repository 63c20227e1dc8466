// Synthetic intra-op sharding problems by family, for bench_sharding_solver and
// the solver's tests: transformer blocks (what the planner meets today), random
// DAGs, layered DAGs and wide DAGs (several branches with long skip
// connections: what mixtures of experts or convolutional towers produce).
//
// Drawn from raw std::mt19937 output, which the standard fixes (its
// distributions are not), so a seed gives the same problem everywhere. Costs
// look like resharding: zero between matching strategies, 0.2–2 elsewhere, one
// pair in 20 infeasible; node costs 0–1, memory 1–4 per strategy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "passes/ShardingSolver.h"

namespace meshflow::families {

using passes::ShardingEdge;
using passes::ShardingNode;
using passes::ShardingProblem;

class Draw {
 public:
  explicit Draw(unsigned seed) : rng_(seed) {}
  double unit() { return rng_() / 4294967296.0; }
  int below(int n) { return static_cast<int>(rng_() % static_cast<uint32_t>(n)); }
  int between(int lo, int hi) { return lo + below(hi - lo + 1); }

  int node(ShardingProblem& p, std::string name, int strategies) {
    ShardingNode n{std::move(name), {}, {}};
    for (int k = 0; k < strategies; ++k) {
      n.costs.push_back(unit());
      n.memory.push_back(1 + 3 * unit());
    }
    p.nodes.push_back(std::move(n));
    return static_cast<int>(p.nodes.size()) - 1;
  }

  void edge(ShardingProblem& p, int from, int to) {
    ShardingEdge e{from, to, {}};
    size_t rows = p.nodes[from].costs.size(), cols = p.nodes[to].costs.size();
    for (size_t r = 0; r < rows; ++r) {
      std::vector<double> row;
      for (size_t c = 0; c < cols; ++c) {
        double v = r == c ? 0.0 : 0.2 + 1.8 * unit();
        if (r != c && below(20) == 0) v = std::numeric_limits<double>::infinity();
        row.push_back(v);
      }
      e.costs.push_back(std::move(row));
    }
    p.edges.push_back(std::move(e));
  }

 private:
  std::mt19937 rng_;
};

/// Transformer blocks of 14 ops (ln1, q, k, v, scores, softmax, context,
/// out_proj, residual add, ln2, fc1, gelu, fc2, residual add) after an embedding.
inline ShardingProblem transformer(int blocks, int strategies, unsigned seed) {
  Draw d(seed);
  ShardingProblem p;
  int x = d.node(p, "embed", strategies);
  for (int b = 0; b < blocks; ++b) {
    auto op = [&](const char* name) {
      return d.node(p, "b" + std::to_string(b) + "." + name, strategies);
    };
    int ln1 = op("ln1"), q = op("q"), k = op("k"), v = op("v"), scores = op("scores");
    int softmax = op("softmax"), ctx = op("context"), out = op("out_proj"), add1 = op("add1");
    int ln2 = op("ln2"), fc1 = op("fc1"), gelu = op("gelu"), fc2 = op("fc2"), add2 = op("add2");
    const std::pair<int, int> links[] = {
        {x, ln1},          {ln1, q},       {ln1, k},    {ln1, v},    {q, scores}, {k, scores},
        {scores, softmax}, {softmax, ctx}, {v, ctx},    {ctx, out},  {out, add1}, {x, add1},
        {add1, ln2},       {ln2, fc1},     {fc1, gelu}, {gelu, fc2}, {fc2, add2}, {add1, add2}};
    for (auto [from, to] : links) d.edge(p, from, to);
    x = add2;
  }
  return p;
}

/// `ops` ops with lo..hi strategies each; op i > 0 reads one to three distinct
/// earlier ops chosen uniformly (the first is always op i − 1, so it is connected).
inline ShardingProblem randomDag(int ops, int lo, int hi, unsigned seed) {
  Draw d(seed);
  ShardingProblem p;
  for (int i = 0; i < ops; ++i) {
    d.node(p, "op" + std::to_string(i), d.between(lo, hi));
    if (i == 0) continue;
    std::vector<int> inputs{i - 1};
    int extra = d.below(3);
    for (int j = 0; j < extra && i > 1; ++j) {
      int from = d.below(i);
      if (std::find(inputs.begin(), inputs.end(), from) == inputs.end()) inputs.push_back(from);
    }
    for (int from : inputs) d.edge(p, from, i);
  }
  return p;
}

/// Layers of `width` ops, each fed by two random ops of the previous layer.
inline ShardingProblem layeredDag(int layers, int width, int strategies, unsigned seed) {
  Draw d(seed);
  ShardingProblem p;
  for (int l = 0; l < layers; ++l) {
    for (int w = 0; w < width; ++w) {
      int self = d.node(p, "l" + std::to_string(l) + "." + std::to_string(w), strategies);
      if (l == 0) continue;
      int a = (l - 1) * width + d.below(width), b = (l - 1) * width + d.below(width);
      d.edge(p, a, self);
      if (b != a) d.edge(p, b, self);
    }
  }
  return p;
}

/// `width` parallel branches of `length` ops after a shared input; every op
/// reads its branch's previous op and, one time in two, any op anywhere before
/// it (a long skip connection or a cross-branch read); a final op joins them.
inline ShardingProblem wideDag(int width, int length, int strategies, unsigned seed) {
  Draw d(seed);
  ShardingProblem p;
  int input = d.node(p, "input", strategies);
  std::vector<int> last(width, input);
  for (int step = 0; step < length; ++step) {
    for (int w = 0; w < width; ++w) {
      int self = d.node(p, "b" + std::to_string(w) + "." + std::to_string(step), strategies);
      d.edge(p, last[w], self);
      int other = d.below(self);
      if (d.below(2) == 0 && other != last[w]) d.edge(p, other, self);
      last[w] = self;
    }
  }
  int join = d.node(p, "join", strategies);
  for (int w = 0; w < width; ++w) d.edge(p, last[w], join);
  return p;
}

/// A memory budget `fraction` of the way from the least to the most memory, so
/// that it binds.
inline ShardingProblem withBudget(ShardingProblem p, double fraction) {
  double least = 0.0, most = 0.0;
  for (const ShardingNode& n : p.nodes) {
    least += *std::min_element(n.memory.begin(), n.memory.end());
    most += *std::max_element(n.memory.begin(), n.memory.end());
  }
  p.memoryBudget = least + fraction * (most - least);
  return p;
}

}  // namespace meshflow::families
