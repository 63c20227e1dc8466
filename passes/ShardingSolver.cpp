#include "passes/ShardingSolver.h"

#include <fmt/format.h>
#include <z3++.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace meshflow::passes {

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Objectives are sums of doubles taken in different orders by different paths;
// two of them within this relative distance are the same objective.
bool sameObjective(double a, double b) {
  if (!std::isfinite(a) || !std::isfinite(b)) return a == b;
  return std::fabs(a - b) <= 1e-9 * std::max({1.0, std::fabs(a), std::fabs(b)});
}

// ---------------------------------------------------------------------------
// Validation: every malformed input is a ShardingError naming what is wrong.

std::string nodeLabel(const ShardingProblem& p, size_t i) {
  return fmt::format("node {} '{}'", i, p.nodes[i].name);
}

void validateNode(const ShardingProblem& p, size_t i) {
  const ShardingNode& n = p.nodes[i];
  if (n.costs.empty()) throw ShardingError(nodeLabel(p, i) + " has no strategies");
  for (size_t k = 0; k < n.costs.size(); ++k) {
    if (!std::isfinite(n.costs[k]) || n.costs[k] < 0) {
      throw ShardingError(
          fmt::format("{}: cost of strategy {} is {}; costs must be finite and "
                      "non-negative",
                      nodeLabel(p, i), k, n.costs[k]));
    }
  }
  if (!n.memory.empty() && n.memory.size() != n.costs.size()) {
    throw ShardingError(fmt::format("{} has {} strategies but {} memory entries", nodeLabel(p, i),
                                    n.costs.size(), n.memory.size()));
  }
  for (size_t k = 0; k < n.memory.size(); ++k) {
    if (!std::isfinite(n.memory[k]) || n.memory[k] < 0) {
      throw ShardingError(
          fmt::format("{}: memory of strategy {} is {}; memory must be finite "
                      "and non-negative",
                      nodeLabel(p, i), k, n.memory[k]));
    }
  }
}

void validateEdge(const ShardingProblem& p, size_t e) {
  const ShardingEdge& edge = p.edges[e];
  int n = static_cast<int>(p.nodes.size());
  if (edge.from < 0 || edge.from >= n || edge.to < 0 || edge.to >= n) {
    throw ShardingError(
        fmt::format("edge {} ({} -> {}) names a node outside 0..{}", e, edge.from, edge.to, n - 1));
  }
  size_t rows = p.nodes[edge.from].costs.size();
  size_t cols = p.nodes[edge.to].costs.size();
  if (edge.costs.size() != rows) {
    throw ShardingError(
        fmt::format("edge {} ({} -> {}): cost matrix has {} rows, expected {} "
                    "(strategies of node {})",
                    e, edge.from, edge.to, edge.costs.size(), rows, edge.from));
  }
  for (size_t r = 0; r < rows; ++r) {
    if (edge.costs[r].size() != cols) {
      throw ShardingError(
          fmt::format("edge {} ({} -> {}): row {} has {} entries, expected {} "
                      "(strategies of node {})",
                      e, edge.from, edge.to, r, edge.costs[r].size(), cols, edge.to));
    }
    for (size_t c = 0; c < cols; ++c) {
      double v = edge.costs[r][c];
      if (std::isnan(v) || v < 0 || v == -kInfinity) {
        throw ShardingError(
            fmt::format("edge {} ({} -> {}): cost [{}][{}] is {}; costs must be "
                        "non-negative (infinite marks an infeasible pair)",
                        e, edge.from, edge.to, r, c, v));
      }
    }
  }
}

void validateProblem(const ShardingProblem& p) {
  for (size_t i = 0; i < p.nodes.size(); ++i) validateNode(p, i);
  for (size_t e = 0; e < p.edges.size(); ++e) validateEdge(p, e);
  if (p.memoryBudget && (!std::isfinite(*p.memoryBudget) || *p.memoryBudget < 0)) {
    throw ShardingError(
        fmt::format("memory budget {} must be finite and non-negative", *p.memoryBudget));
  }
}

// ---------------------------------------------------------------------------
// The working graph that exact shrinking rewrites.

struct Matrix {
  int rows = 0;
  int cols = 0;
  std::vector<double> values;

  Matrix(int r, int c, double fill = 0.0) : rows(r), cols(c), values(size_t(r) * c, fill) {}
  double& at(int r, int c) { return values[size_t(r) * cols + c]; }
  double at(int r, int c) const { return values[size_t(r) * cols + c]; }
  Matrix transposed() const {
    Matrix t(cols, rows);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) t.at(c, r) = at(r, c);
    }
    return t;
  }
};

struct WorkEdge {
  int u = 0;  // u < v; the matrix is indexed [strategy of u][strategy of v].
  int v = 0;
  Matrix cost;
};

// A node folded away by shrinking, with what back-substitution needs to choose
// its strategy once its neighbours' choices are known.
struct Elimination {
  int node = 0;
  std::vector<double> cost;
  std::vector<int> neighbours;
  std::vector<Matrix> edges;  // [strategy of node][strategy of neighbour]
};

class WorkGraph {
 public:
  explicit WorkGraph(const ShardingProblem& p) : adj_(p.nodes.size()) {
    for (const ShardingNode& n : p.nodes) cost.push_back(n.costs);
    alive.assign(p.nodes.size(), true);
    for (const ShardingEdge& e : p.edges) addInputEdge(e);
  }

  std::vector<std::vector<double>> cost;
  std::vector<bool> alive;

  int degree(int n) const { return static_cast<int>(adj_[n].size()); }
  int strategies(int n) const { return static_cast<int>(cost[n].size()); }
  // Neighbours in increasing index order (a std::map keeps that order).
  std::vector<int> neighbours(int n) const {
    std::vector<int> out;
    for (const auto& [m, e] : adj_[n]) out.push_back(m);
    return out;
  }
  // The edge between a and b oriented [strategy of a][strategy of b].
  Matrix edgeFrom(int a, int b) const {
    const WorkEdge& e = edges_.at(adj_[a].at(b));
    return e.u == a ? e.cost : e.cost.transposed();
  }
  void addEdge(int a, int b, const Matrix& m) {
    Matrix oriented = a < b ? m : m.transposed();
    int u = std::min(a, b), v = std::max(a, b);
    auto it = adj_[u].find(v);
    if (it == adj_[u].end()) {
      edges_.push_back({u, v, oriented});
      adj_[u][v] = adj_[v][u] = static_cast<int>(edges_.size()) - 1;
      return;
    }
    Matrix& existing = edges_[it->second].cost;
    for (size_t i = 0; i < existing.values.size(); ++i) existing.values[i] += oriented.values[i];
  }
  void removeEdge(int a, int b) {
    adj_[a].erase(b);
    adj_[b].erase(a);
  }

 private:
  void addInputEdge(const ShardingEdge& e) {
    Matrix m(static_cast<int>(e.costs.size()), static_cast<int>(e.costs[0].size()));
    for (int r = 0; r < m.rows; ++r) {
      for (int c = 0; c < m.cols; ++c) m.at(r, c) = e.costs[r][c];
    }
    if (e.from != e.to) return addEdge(e.from, e.to, m);
    // A self-loop only ever sees its diagonal: both ends take the same strategy.
    for (int k = 0; k < m.rows; ++k) cost[e.from][k] += m.at(k, k);
  }

  std::vector<std::map<int, int>> adj_;
  std::vector<WorkEdge> edges_;
};

// ---------------------------------------------------------------------------
// Memory: nodes whose memory differs between strategies couple the whole problem,
// so they are never folded away; everything else can be.

struct MemoryModel {
  bool active = false;
  double budget = 0.0;        // What the coupled nodes may use.
  std::vector<bool> coupled;  // Per node: its choice changes memory.
  std::vector<std::vector<double>> memory;
};

double memoryOf(const ShardingProblem& p, size_t i, size_t k) {
  return p.nodes[i].memory.empty() ? 0.0 : p.nodes[i].memory[k];
}

// Subtracts what every choice must spend, rules out strategies that cannot fit
// even when every other node takes its smallest, and drops the constraint when
// nothing left can break it.
MemoryModel buildMemoryModel(const ShardingProblem& p, WorkGraph& g) {
  MemoryModel mm;
  size_t n = p.nodes.size();
  mm.coupled.assign(n, false);
  if (!p.memoryBudget) return mm;
  std::vector<double> least(n), most(n);
  double leastTotal = 0.0;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> m;
    for (size_t k = 0; k < p.nodes[i].costs.size(); ++k) m.push_back(memoryOf(p, i, k));
    least[i] = *std::min_element(m.begin(), m.end());
    most[i] = *std::max_element(m.begin(), m.end());
    leastTotal += least[i];
    mm.memory.push_back(std::move(m));
  }
  if (leastTotal > *p.memoryBudget) {
    throw ShardingError(
        fmt::format("infeasible: the memory budget {} is below {}, the sum of "
                    "every node's smallest memory",
                    *p.memoryBudget, leastTotal));
  }
  double worstTotal = 0.0;
  for (size_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < mm.memory[i].size(); ++k) {
      if (leastTotal - least[i] + mm.memory[i][k] > *p.memoryBudget) g.cost[i][k] = kInfinity;
    }
    double feasibleMost = 0.0;
    for (size_t k = 0; k < mm.memory[i].size(); ++k) {
      if (std::isfinite(g.cost[i][k])) feasibleMost = std::max(feasibleMost, mm.memory[i][k]);
    }
    worstTotal += feasibleMost;
  }
  if (worstTotal <= *p.memoryBudget) return mm;
  mm.active = true;
  mm.budget = *p.memoryBudget;
  for (size_t i = 0; i < n; ++i) {
    if (least[i] == most[i]) {
      mm.budget -= least[i];
    } else {
      mm.coupled[i] = true;
    }
  }
  return mm;
}

// ---------------------------------------------------------------------------
// Exact shrinking. Folding a leaf into its neighbour, or a node of degree two
// into the edge between its neighbours, keeps the optimum: the folded node's best
// strategy depends only on its neighbours' strategies.

class Shrinker {
 public:
  Shrinker(WorkGraph& g, const MemoryModel& mm, const ShardingProblem& p) : g_(g), mm_(mm), p_(p) {}

  std::vector<Elimination> run() {
    std::set<int> work;
    for (int n = 0; n < static_cast<int>(g_.cost.size()); ++n) work.insert(n);
    while (!work.empty()) {
      int n = *work.begin();
      work.erase(work.begin());
      if (!g_.alive[n] || mm_.coupled[n] || g_.degree(n) > 2) continue;
      for (int m : g_.neighbours(n)) work.insert(m);
      eliminate(n);
    }
    return std::move(done_);
  }

  double constant() const { return constant_; }

 private:
  void eliminate(int n) {
    Elimination e{n, g_.cost[n], g_.neighbours(n), {}};
    for (int m : e.neighbours) e.edges.push_back(g_.edgeFrom(n, m));
    for (int m : e.neighbours) g_.removeEdge(n, m);
    g_.alive[n] = false;
    if (e.neighbours.empty()) foldIsolated(e);
    if (e.neighbours.size() == 1) foldLeaf(e);
    if (e.neighbours.size() == 2) foldSeries(e);
    done_.push_back(std::move(e));
  }

  void foldIsolated(const Elimination& e) {
    double best = *std::min_element(e.cost.begin(), e.cost.end());
    if (!std::isfinite(best)) throw noStrategy(e.node);
    constant_ += best;
  }

  void foldLeaf(const Elimination& e) {
    int u = e.neighbours[0];
    for (int s = 0; s < g_.strategies(u); ++s) {
      double best = kInfinity;
      for (size_t k = 0; k < e.cost.size(); ++k) {
        best = std::min(best, e.cost[k] + e.edges[0].at(k, s));
      }
      g_.cost[u][s] += best;
    }
  }

  void foldSeries(const Elimination& e) {
    int u = e.neighbours[0], w = e.neighbours[1];
    Matrix merged(g_.strategies(u), g_.strategies(w), kInfinity);
    for (int s = 0; s < merged.rows; ++s) {
      for (int t = 0; t < merged.cols; ++t) {
        for (size_t k = 0; k < e.cost.size(); ++k) {
          double c = e.cost[k] + e.edges[0].at(k, s) + e.edges[1].at(k, t);
          merged.at(s, t) = std::min(merged.at(s, t), c);
        }
      }
    }
    g_.addEdge(u, w, merged);
  }

  ShardingError noStrategy(int n) const {
    return ShardingError(
        fmt::format("infeasible: {} has no strategy compatible with its "
                    "neighbours (every choice meets an infinite edge cost{})",
                    nodeLabel(p_, n), mm_.active ? " or the memory budget" : ""));
  }

  WorkGraph& g_;
  const MemoryModel& mm_;
  const ShardingProblem& p_;
  std::vector<Elimination> done_;
  double constant_ = 0.0;
};

int bestGivenNeighbours(const Elimination& e, const std::vector<int>& choice) {
  int best = 0;
  double bestCost = kInfinity;
  for (size_t k = 0; k < e.cost.size(); ++k) {
    double c = e.cost[k];
    for (size_t j = 0; j < e.neighbours.size(); ++j) c += e.edges[j].at(k, choice[e.neighbours[j]]);
    if (c < bestCost) {
      bestCost = c;
      best = static_cast<int>(k);
    }
  }
  return best;
}

// ---------------------------------------------------------------------------
// The residual problem: the nodes shrinking could not fold away.

struct Residual {
  std::vector<int> nodes;                   // Original indices, increasing.
  std::vector<std::vector<double>> cost;    // Per residual node.
  std::vector<std::vector<double>> memory;  // Empty when not coupled.
  struct Edge {
    int a, b;  // Residual indices, a < b.
    Matrix cost;
  };
  std::vector<Edge> edges;
  bool memoryActive = false;
  double budget = 0.0;
};

Residual buildResidual(const WorkGraph& g, const MemoryModel& mm) {
  Residual r;
  std::map<int, int> index;
  for (int n = 0; n < static_cast<int>(g.alive.size()); ++n) {
    if (!g.alive[n]) continue;
    index[n] = static_cast<int>(r.nodes.size());
    r.nodes.push_back(n);
    r.cost.push_back(g.cost[n]);
    r.memory.push_back(mm.active && mm.coupled[n] ? mm.memory[n] : std::vector<double>{});
  }
  for (int n : r.nodes) {
    for (int m : g.neighbours(n)) {
      if (m > n) r.edges.push_back({index[n], index[m], g.edgeFrom(n, m)});
    }
  }
  r.memoryActive = mm.active;
  r.budget = mm.budget;
  return r;
}

// Depth-first branch and bound: every cost is non-negative, so a partial sum
// plus the least node cost of every node still open, at or above the best
// complete one, can be cut. Strategies are tried in increasing order and only a
// strictly better objective replaces the best, so the answer is the
// lexicographically smallest optimum. Gives up (complete = false) after
// `maxVisits` search nodes, leaving the problem to Z3.
class Enumerator {
 public:
  Enumerator(const Residual& r, uint64_t maxVisits)
      : r_(r), choice_(r.nodes.size()), maxVisits_(maxVisits) {
    incident_.resize(r.nodes.size());
    for (size_t e = 0; e < r.edges.size(); ++e) incident_[r.edges[e].b].push_back(e);
    suffixMemory_.assign(r.nodes.size() + 1, 0.0);
    suffixCost_.assign(r.nodes.size() + 1, 0.0);
    for (size_t i = r.nodes.size(); i-- > 0;) {
      suffixMemory_[i] = suffixMemory_[i + 1] + least(r.memory[i]);
      suffixCost_[i] = suffixCost_[i + 1] + least(r.cost[i]);
    }
  }

  bool complete() const { return visits_ <= maxVisits_; }

  std::optional<std::vector<int>> solve() {
    visit(0, 0.0, 0.0);
    return best_;
  }

 private:
  static double least(const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
  }

  void visit(size_t i, double cost, double memory) {
    if (++visits_ > maxVisits_) return;
    if (cost + suffixCost_[i] >= bestCost_) return;
    if (r_.memoryActive && memory + suffixMemory_[i] > r_.budget) return;
    if (i == r_.nodes.size()) {
      bestCost_ = cost;
      best_ = choice_;
      return;
    }
    for (size_t k = 0; k < r_.cost[i].size(); ++k) {
      choice_[i] = static_cast<int>(k);
      double c = cost + r_.cost[i][k];
      for (size_t e : incident_[i]) c += r_.edges[e].cost.at(choice_[r_.edges[e].a], k);
      double m = memory + (r_.memory[i].empty() ? 0.0 : r_.memory[i][k]);
      visit(i + 1, c, m);
    }
  }

  const Residual& r_;
  std::vector<int> choice_;
  std::vector<std::vector<size_t>> incident_;
  std::vector<double> suffixMemory_;
  std::vector<double> suffixCost_;
  std::optional<std::vector<int>> best_;
  double bestCost_ = kInfinity;
  uint64_t maxVisits_;
  uint64_t visits_ = 0;
};

// ---------------------------------------------------------------------------
// Z3. One boolean per (node, strategy) with exactly-one constraints; node costs
// and edge costs become weighted soft constraints (MaxSAT, which Z3's MaxRes
// engine solves far faster than an arithmetic objective), infinite edge entries
// become hard clauses, memory a linear real constraint.

// Z3 reads soft-constraint weights as decimals only (no exponent, no fraction),
// so each double is printed in full: every binary fraction is a finite decimal.
std::string exactDecimal(double w) {
  int exponent = 0;
  std::frexp(w, &exponent);
  int digits = std::max(0, 53 - exponent);
  std::string s = fmt::format("{:.{}f}", w, digits);
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

// Moves each edge's row and column minima into its endpoints' costs, and each
// node's minimum into a constant: the objective of every assignment is unchanged
// but most soft constraints get weight zero and vanish, which shortens MaxRes.
void reparametrise(Residual& r) {
  for (Residual::Edge& e : r.edges) {
    for (int s = 0; s < e.cost.rows; ++s) {
      double least = kInfinity;
      for (int t = 0; t < e.cost.cols; ++t) least = std::min(least, e.cost.at(s, t));
      if (!std::isfinite(least)) continue;
      for (int t = 0; t < e.cost.cols; ++t) e.cost.at(s, t) -= least;
      r.cost[e.a][s] += least;
    }
    for (int t = 0; t < e.cost.cols; ++t) {
      double least = kInfinity;
      for (int s = 0; s < e.cost.rows; ++s) least = std::min(least, e.cost.at(s, t));
      if (!std::isfinite(least)) continue;
      for (int s = 0; s < e.cost.rows; ++s) e.cost.at(s, t) -= least;
      r.cost[e.b][t] += least;
    }
  }
  for (auto& c : r.cost) {
    double least = *std::min_element(c.begin(), c.end());
    if (!std::isfinite(least)) continue;
    for (double& v : c) v -= least;
  }
}

struct Z3Outcome {
  std::optional<std::vector<int>> choice;
  bool optimal = false;
  bool infeasible = false;
};

class Z3Model {
 public:
  Z3Model(const Residual& r, double timeBudgetSeconds, uint64_t resourceLimit)
      : r_(r), opt_(ctx_) {
    z3::params params(ctx_);
    double ms = std::clamp(timeBudgetSeconds * 1000.0, 1.0, 4.0e9);
    params.set("timeout", static_cast<unsigned>(ms));
    // The resource limit counts Z3's internal work, so where it stops does not
    // depend on the machine's speed or load (the optimiser's own parameter, set
    // on this solver only: no global Z3 state is touched).
    if (resourceLimit > 0) {
      params.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(resourceLimit, 0xffffffffu)));
    }
    opt_.set(params);
    declareChoices();
    addEdges();
    if (r.memoryActive) addMemory();
  }

  Z3Outcome solve() {
    Z3Outcome out;
    z3::check_result result = opt_.check();
    if (result == z3::unsat) {
      out.infeasible = true;
      return out;
    }
    out.optimal = result == z3::sat;
    // On a timeout the optimiser keeps the best model it found so far, if any.
    try {
      out.choice = readChoice(opt_.get_model());
    } catch (const z3::exception&) {
    }
    return out;
  }

 private:
  void declareChoices() {
    for (size_t i = 0; i < r_.nodes.size(); ++i) {
      z3::expr_vector xs(ctx_);
      for (size_t k = 0; k < r_.cost[i].size(); ++k) {
        z3::expr x = ctx_.bool_const(fmt::format("x_{}_{}", i, k).c_str());
        xs.push_back(x);
        if (!std::isfinite(r_.cost[i][k])) {
          opt_.add(!x);
        } else if (r_.cost[i][k] > 0) {
          opt_.add_soft(!x, exactDecimal(r_.cost[i][k]).c_str());
        }
      }
      opt_.add(z3::mk_or(xs));
      opt_.add(z3::atmost(xs, 1));
      x_.push_back(xs);
    }
  }

  void addEdges() {
    for (const Residual::Edge& e : r_.edges) {
      for (int s = 0; s < e.cost.rows; ++s) {
        for (int t = 0; t < e.cost.cols; ++t) {
          double c = e.cost.at(s, t);
          z3::expr notBoth = !(x_[e.a][s] && x_[e.b][t]);
          if (!std::isfinite(c)) {
            opt_.add(notBoth);
          } else if (c > 0) {
            opt_.add_soft(notBoth, exactDecimal(c).c_str());
          }
        }
      }
    }
  }

  // Memory is scaled by a power of two until every value is an integer (exact
  // for doubles) and summed as integers, so Z3's optimiser can turn the sum of
  // 0-1 terms into a pseudo-Boolean constraint instead of reasoning over reals.
  void addMemory() {
    std::vector<double> values{r_.budget};
    for (const auto& m : r_.memory) values.insert(values.end(), m.begin(), m.end());
    int shift = 0;
    auto integral = [&](double v) {
      return std::ldexp(v, shift) == std::floor(std::ldexp(v, shift));
    };
    while (shift < 1100 && !std::all_of(values.begin(), values.end(), integral)) ++shift;
    auto scaled = [&](double v) {
      return ctx_.int_val(fmt::format("{:.0f}", std::ldexp(v, shift)).c_str());
    };
    z3::expr total = ctx_.int_val(0);
    for (size_t i = 0; i < r_.nodes.size(); ++i) {
      for (size_t k = 0; k < r_.memory[i].size(); ++k) {
        if (r_.memory[i][k] == 0) continue;
        total = total + z3::ite(x_[i][k], scaled(r_.memory[i][k]), ctx_.int_val(0));
      }
    }
    opt_.add(total <= scaled(r_.budget));
  }

  std::vector<int> readChoice(const z3::model& model) {
    std::vector<int> choice(r_.nodes.size(), 0);
    for (size_t i = 0; i < r_.nodes.size(); ++i) {
      for (unsigned k = 0; k < x_[i].size(); ++k) {
        if (model.eval(x_[i][k], true).is_true()) choice[i] = static_cast<int>(k);
      }
    }
    return choice;
  }

  const Residual& r_;
  z3::context ctx_;
  z3::optimize opt_;
  std::vector<z3::expr_vector> x_;
};

// ---------------------------------------------------------------------------
// Evaluation on the original problem: objective, local moves, alternatives.

class Evaluator {
 public:
  explicit Evaluator(const ShardingProblem& p) : p_(p), incident_(p.nodes.size()) {
    for (size_t e = 0; e < p.edges.size(); ++e) {
      incident_[p.edges[e].from].push_back(e);
      if (p.edges[e].to != p.edges[e].from) incident_[p.edges[e].to].push_back(e);
    }
  }

  double objective(const std::vector<int>& c) const {
    double total = 0.0, memory = 0.0;
    for (size_t i = 0; i < p_.nodes.size(); ++i) {
      total += p_.nodes[i].costs[c[i]];
      memory += memoryOf(p_, i, c[i]);
    }
    for (const ShardingEdge& e : p_.edges) total += e.costs[c[e.from]][c[e.to]];
    if (!fits(memory)) return kInfinity;
    return total;
  }

  // The objective with node i switched to strategy k (everything else fixed).
  double withChoice(std::vector<int>& c, size_t i, int k) const {
    int old = c[i];
    c[i] = k;
    double v = objective(c);
    c[i] = old;
    return v;
  }

  // The objective with node i switched to strategy k, from the objective
  // `current` of c, touching only node i's edges.
  double switched(const std::vector<int>& c, double current, size_t i, int k) const {
    if (k == c[i]) return current;
    if (p_.memoryBudget) {
      double memory = 0.0;
      for (size_t j = 0; j < c.size(); ++j) memory += memoryOf(p_, j, j == i ? k : c[j]);
      if (!fits(memory)) return kInfinity;
    }
    return current - local(c, i, c[i]) + local(c, i, k);
  }

  // Lowers each node's strategy while the objective stays the same, so equal
  // optima found by different paths (Z3, enumeration, back-substitution) print
  // the same choice.
  void canonicalise(std::vector<int>& c) const {
    double current = objective(c);
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t i = 0; i < c.size(); ++i) {
        for (int k = 0; k < c[i]; ++k) {
          double v = switched(c, current, i, k);
          if (v <= current || sameObjective(v, current)) {
            c[i] = k;
            current = objective(c);
            moved = true;
            break;
          }
        }
      }
    }
  }

  std::vector<std::vector<double>> alternatives(const std::vector<int>& c) const {
    double current = objective(c);
    std::vector<std::vector<double>> out(c.size());
    for (size_t i = 0; i < c.size(); ++i) {
      for (size_t k = 0; k < p_.nodes[i].costs.size(); ++k) {
        int ki = static_cast<int>(k);
        out[i].push_back(ki == c[i] ? current : switched(c, current, i, ki));
      }
    }
    return out;
  }

 private:
  // The shrunk problem compares memory after subtracting constants, in another
  // order; the same relative slack keeps the two judgements in agreement.
  bool fits(double memory) const {
    return !p_.memoryBudget || memory <= *p_.memoryBudget ||
           sameObjective(memory, *p_.memoryBudget);
  }

  // Node i's own cost and its edges' costs with i on strategy k.
  double local(const std::vector<int>& c, size_t i, int k) const {
    double total = p_.nodes[i].costs[k];
    for (size_t e : incident_[i]) {
      const ShardingEdge& edge = p_.edges[e];
      int a = edge.from == static_cast<int>(i) ? k : c[edge.from];
      int b = edge.to == static_cast<int>(i) ? k : c[edge.to];
      total += edge.costs[a][b];
    }
    return total;
  }

  const ShardingProblem& p_;
  std::vector<std::vector<size_t>> incident_;
};

// Single-node improvements until none helps. Infeasible moves evaluate to
// infinity, so a feasible start stays feasible.
void improveLocally(const ShardingProblem& p, const Evaluator& ev, std::vector<int>& c) {
  double current = ev.objective(c);
  for (bool improved = true; improved;) {
    improved = false;
    for (size_t i = 0; i < c.size(); ++i) {
      for (size_t k = 0; k < p.nodes[i].costs.size(); ++k) {
        double v = ev.withChoice(c, i, static_cast<int>(k));
        if (v < current && !sameObjective(v, current)) {
          c[i] = static_cast<int>(k);
          current = v;
          improved = true;
        }
      }
    }
  }
}

// A quick feasible answer to fall back on when Z3 runs out of time: from a greedy
// start (cheapest given the nodes before) and from a least-memory start (which
// fits any budget that can be met node by node), improved locally.
std::optional<std::vector<int>> localSearch(const ShardingProblem& p, const Evaluator& ev) {
  std::vector<int> greedy(p.nodes.size(), 0), lean(p.nodes.size(), 0);
  for (size_t i = 0; i < p.nodes.size(); ++i) {
    double best = kInfinity;
    for (size_t k = 0; k < p.nodes[i].costs.size(); ++k) {
      double v = ev.withChoice(greedy, i, static_cast<int>(k));
      if (v < best) {
        best = v;
        greedy[i] = static_cast<int>(k);
      }
      if (memoryOf(p, i, k) < memoryOf(p, i, lean[i])) lean[i] = static_cast<int>(k);
    }
  }
  improveLocally(p, ev, greedy);
  improveLocally(p, ev, lean);
  std::vector<int>& best = ev.objective(lean) < ev.objective(greedy) ? lean : greedy;
  if (!std::isfinite(ev.objective(best))) return std::nullopt;
  return best;
}

ShardingError residualInfeasible(const ShardingProblem& p, const Residual& r) {
  std::string names;
  for (int n : r.nodes) {
    names += fmt::format("{}{} '{}'", names.empty() ? "" : ", ", n, p.nodes[n].name);
  }
  return ShardingError(
      fmt::format("infeasible: no choice of strategies for nodes {} avoids every "
                  "infinite edge cost{}",
                  names, r.memoryActive ? " within the memory budget" : ""));
}

// An edge with no finite entry rules out every assignment; say so by name rather
// than as an anonymous conflict found later.
void checkEdgesAllowSomePair(const ShardingProblem& p) {
  for (size_t e = 0; e < p.edges.size(); ++e) {
    bool any = false;
    for (const auto& row : p.edges[e].costs) {
      for (double v : row) any = any || std::isfinite(v);
    }
    if (!any) {
      throw ShardingError(
          fmt::format("infeasible: edge {} ({} -> {}) allows no pair of "
                      "strategies (every cost is infinite)",
                      e, p.edges[e].from, p.edges[e].to));
    }
  }
}

struct ResidualAnswer {
  std::vector<int> choice;  // Per residual node.
  bool optimal = true;
  bool haveChoice = true;  // False when Z3 stopped without any model.
};

// Solves what shrinking left: branch and bound first, which settles most residual
// problems of a few dozen nodes at once, then Z3 under the time budget. Returns a
// choice per original node (residual nodes set, the others 0) or throws.
ResidualAnswer solveResidual(const ShardingProblem& p, Residual r, const SolveOptions& options) {
  ResidualAnswer answer;
  if (r.nodes.empty()) return answer;
  Enumerator enumerator(r, options.searchLimit);
  std::optional<std::vector<int>> best = enumerator.solve();
  if (enumerator.complete()) {
    if (!best) throw residualInfeasible(p, r);
    answer.choice = *best;
    return answer;
  }
  reparametrise(r);
  Z3Outcome z3 = Z3Model(r, options.timeBudgetSeconds, options.resourceLimit).solve();
  if (z3.infeasible) throw residualInfeasible(p, r);
  answer.optimal = z3.optimal;
  answer.choice = z3.choice ? *z3.choice : std::vector<int>(r.nodes.size(), 0);
  answer.haveChoice = z3.choice.has_value();
  return answer;
}

}  // namespace

ShardingSolution solveSharding(const ShardingProblem& problem, const SolveOptions& options) {
  validateProblem(problem);
  checkEdgesAllowSomePair(problem);
  WorkGraph graph(problem);
  MemoryModel memory = buildMemoryModel(problem, graph);
  Shrinker shrinker(graph, memory, problem);
  std::vector<Elimination> eliminated = shrinker.run();
  Residual residual = buildResidual(graph, memory);
  Evaluator ev(problem);

  ShardingSolution solution;
  solution.residualNodes = residual.nodes.size();
  ResidualAnswer answer = solveResidual(problem, residual, options);
  solution.choice.assign(problem.nodes.size(), 0);
  for (size_t i = 0; i < residual.nodes.size(); ++i) {
    solution.choice[residual.nodes[i]] = answer.choice[i];
  }
  for (auto it = eliminated.rbegin(); it != eliminated.rend(); ++it) {
    solution.choice[it->node] = bestGivenNeighbours(*it, solution.choice);
  }
  solution.optimal = answer.optimal;
  if (!answer.optimal) {
    // Z3 stopped early; its last model may be missing or may not even satisfy the
    // constraints, so keep whichever of it and a local search is better.
    std::optional<std::vector<int>> local = localSearch(problem, ev);
    double z3Objective = answer.haveChoice ? ev.objective(solution.choice) : kInfinity;
    if (local && ev.objective(*local) < z3Objective) solution.choice = *local;
    if (!std::isfinite(ev.objective(solution.choice))) {
      throw ShardingError(fmt::format(
          "no feasible assignment found within the time budget of {} s ({} nodes left after "
          "shrinking); infeasibility not proven",
          options.timeBudgetSeconds, residual.nodes.size()));
    }
  }
  ev.canonicalise(solution.choice);
  solution.objective = ev.objective(solution.choice);
  if (!std::isfinite(solution.objective)) {
    throw ShardingError("internal error: the solver's answer breaks a constraint");
  }
  solution.alternatives = ev.alternatives(solution.choice);
  return solution;
}

}  // namespace meshflow::passes
