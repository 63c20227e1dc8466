#include "passes/ShardingElimination.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace meshflow::passes::sharding {

namespace {

// A slot read from one of its ends: at(k, s) with k the strategy of `node`.
class OrientedSlot {
 public:
  OrientedSlot(const EliminationPlan& plan, const Folded& f, int slot, int node)
      : m_(f.slots[slot]), flip_(plan.slotEnds[slot].first != node) {}
  double at(int k, int s) const { return flip_ ? m_.at(s, k) : m_.at(k, s); }

 private:
  const Matrix& m_;
  bool flip_;
};

// The structure only: who is adjacent to whom, through which slot.
class PlanBuilder {
 public:
  PlanBuilder(const CostGraph& g, const std::vector<bool>& keep)
      : g_(g), keep_(keep), adj_(g.nodes()), folded_(g.nodes(), false) {
    for (const CostGraph::Edge& e : g.edges) link(e.u, e.v);
    plan_.stepOf.assign(g.nodes(), -1);
  }

  EliminationPlan run() {
    std::set<int> open;
    for (int n = 0; n < static_cast<int>(adj_.size()); ++n) open.insert(n);
    while (!open.empty()) {
      int n = *open.begin();
      open.erase(open.begin());
      if (folded_[n] || keep_[n] || adj_[n].size() > 2) continue;
      for (const auto& [m, slot] : adj_[n]) open.insert(m);
      foldNode(n);
    }
    uint64_t work = 0;
    for (const EliminationStep& st : plan_.steps) {
      work += uint64_t(g_.strategies(st.node)) * (st.n1 >= 0 ? g_.strategies(st.n1) : 1) *
              (st.n2 >= 0 ? g_.strategies(st.n2) : 1);
    }
    plan_.foldSteps = 1 + work / 64;
    for (int n = 0; n < static_cast<int>(adj_.size()); ++n) {
      if (folded_[n]) continue;
      plan_.residual.push_back(n);
      for (const auto& [m, slot] : adj_[n]) {
        if (m > n) plan_.residualSlots.push_back(slot);
      }
    }
    return std::move(plan_);
  }

 private:
  int link(int a, int b) {
    int slot = static_cast<int>(plan_.slotEnds.size());
    plan_.slotEnds.push_back(std::minmax(a, b));
    adj_[a][b] = adj_[b][a] = slot;
    return slot;
  }

  void foldNode(int n) {
    EliminationStep step{n};
    auto it = adj_[n].begin();
    if (it != adj_[n].end()) std::tie(step.n1, step.e1) = *it++;
    if (it != adj_[n].end()) std::tie(step.n2, step.e2) = *it;
    for (int m : {step.n1, step.n2}) {
      if (m >= 0) adj_[m].erase(n);
    }
    adj_[n].clear();
    if (step.n2 >= 0) {
      auto existing = adj_[step.n1].find(step.n2);
      step.out = existing != adj_[step.n1].end() ? existing->second : link(step.n1, step.n2);
    }
    folded_[n] = true;
    plan_.stepOf[n] = static_cast<int>(plan_.steps.size());
    plan_.steps.push_back(step);
  }

  const CostGraph& g_;
  const std::vector<bool>& keep_;
  std::vector<std::map<int, int>> adj_;  // Neighbour -> slot, in increasing order.
  std::vector<bool> folded_;
  EliminationPlan plan_;
};

void foldStep(const EliminationPlan& plan, const EliminationStep& st, Folded& f) {
  const std::vector<double>& c = f.cost[st.node];
  int sv = static_cast<int>(c.size());
  if (st.n1 < 0) {
    double best = *std::min_element(c.begin(), c.end());
    if (!std::isfinite(best) && f.infeasibleNode < 0) f.infeasibleNode = st.node;
    f.constant += best;
    return;
  }
  OrientedSlot a(plan, f, st.e1, st.node);
  if (st.n2 < 0) {
    std::vector<double>& target = f.cost[st.n1];
    for (int s = 0; s < static_cast<int>(target.size()); ++s) {
      double best = kInfinity;
      for (int k = 0; k < sv; ++k) best = std::min(best, c[k] + a.at(k, s));
      target[s] += best;
    }
    return;
  }
  // Laid out [neighbour's strategy][k] so that the minimum runs over contiguous k.
  OrientedSlot b(plan, f, st.e2, st.node);
  Matrix& out = f.slots[st.out];  // Oriented (n1, n2): n1 < n2.
  Matrix toN1(out.rows, sv), toN2(out.cols, sv);
  for (int k = 0; k < sv; ++k) {
    for (int s = 0; s < out.rows; ++s) toN1.at(s, k) = c[k] + a.at(k, s);
    for (int t = 0; t < out.cols; ++t) toN2.at(t, k) = b.at(k, t);
  }
  for (int s = 0; s < out.rows; ++s) {
    const double* x = &toN1.values[size_t(s) * sv];
    for (int t = 0; t < out.cols; ++t) {
      const double* y = &toN2.values[size_t(t) * sv];
      double best = kInfinity;
      for (int k = 0; k < sv; ++k) best = std::min(best, x[k] + y[k]);
      out.at(s, t) += best;
    }
  }
}

// The cost of a folded node's strategy k with its neighbours on s and t, counting
// everything folded into it and its edges to them.
double localCost(const EliminationPlan& plan, const Folded& f, const EliminationStep& st, int k,
                 int s, int t) {
  double v = f.cost[st.node][k];
  if (st.n1 >= 0) v += OrientedSlot(plan, f, st.e1, st.node).at(k, s);
  if (st.n2 >= 0) v += OrientedSlot(plan, f, st.e2, st.node).at(k, t);
  return v;
}

// The backward pass of min-marginals. Each folded node's cluster (the node and
// its neighbours when folded) gets the least objective for every strategy triple;
// its separator (the neighbours) takes its values from the cluster of the
// neighbour folded first, or from the residual problem.
class MarginalPass {
 public:
  MarginalPass(const EliminationPlan& plan, const Folded& f, double optimum, double cap,
               const ResidualMarginal& residual)
      : plan_(plan),
        f_(f),
        optimum_(optimum),
        cap_(cap),
        residual_(residual),
        marginal_(f.cost.size()),
        cluster_(plan.steps.size()) {}

  std::vector<std::vector<double>> run() {
    for (int r : plan_.residual) {
      for (int k = 0; k < strategies(r); ++k)
        marginal_[r].push_back(capped(residual_(r, k, -1, 0)));
    }
    for (int j = static_cast<int>(plan_.steps.size()) - 1; j >= 0; --j) visit(j);
    return std::move(marginal_);
  }

 private:
  int strategies(int n) const { return n < 0 ? 1 : static_cast<int>(f_.cost[n].size()); }
  double capped(double v) const { return v <= cap_ ? v : kInfinity; }

  void visit(int j) {
    const EliminationStep& st = plan_.steps[j];
    int sv = strategies(st.node), s1 = strategies(st.n1), s2 = strategies(st.n2);
    std::vector<double> sep = separator(st);
    std::vector<double>& cl = cluster_[j];
    cl.assign(size_t(sv) * s1 * s2, kInfinity);
    std::vector<double>& m = marginal_[st.node];
    m.assign(sv, kInfinity);
    const std::vector<double>& own = f_.cost[st.node];
    std::vector<double> local(sv);
    for (int s = 0; s < s1; ++s) {
      for (int t = 0; t < s2; ++t) {
        double outside = sep[size_t(s) * s2 + t];
        if (!std::isfinite(outside)) continue;
        for (int k = 0; k < sv; ++k) local[k] = own[k];
        if (st.n1 >= 0) addEdge(st.e1, st.node, s, local);
        if (st.n2 >= 0) addEdge(st.e2, st.node, t, local);
        double least = *std::min_element(local.begin(), local.end());
        if (!std::isfinite(least)) continue;
        // `outside` counts the fold's own least value; swap it for strategy k's.
        for (int k = 0; k < sv; ++k) {
          double v = capped(outside - least + local[k]);
          cl[(size_t(k) * s1 + s) * s2 + t] = v;
          m[k] = std::min(m[k], v);
        }
      }
    }
  }

  // local[k] += the edge's cost with the folded node on k and its neighbour on s.
  void addEdge(int slot, int node, int s, std::vector<double>& local) const {
    OrientedSlot e(plan_, f_, slot, node);
    for (size_t k = 0; k < local.size(); ++k) local[k] += e.at(int(k), s);
  }

  // The least objective for each strategy pair of the step's neighbours.
  std::vector<double> separator(const EliminationStep& st) {
    if (st.n1 < 0) return {capped(optimum_)};
    if (st.n2 < 0) return marginal_[st.n1];
    int s1 = strategies(st.n1), s2 = strategies(st.n2);
    std::vector<double> sep(size_t(s1) * s2, kInfinity);
    int p1 = plan_.stepOf[st.n1], p2 = plan_.stepOf[st.n2];
    if (p1 < 0 && p2 < 0) {
      for (int s = 0; s < s1; ++s) {
        for (int t = 0; t < s2; ++t) {
          if (!std::isfinite(marginal_[st.n1][s]) || !std::isfinite(marginal_[st.n2][t])) continue;
          sep[size_t(s) * s2 + t] = capped(residual_(st.n1, s, st.n2, t));
        }
      }
      return sep;
    }
    // The neighbour folded first saw the other as its neighbour.
    bool firstIsN1 = p2 < 0 || (p1 >= 0 && p1 < p2);
    int parent = firstIsN1 ? st.n1 : st.n2, other = firstIsN1 ? st.n2 : st.n1;
    Matrix pair = pairMarginal(plan_.stepOf[parent], other);
    for (int s = 0; s < s1; ++s) {
      for (int t = 0; t < s2; ++t)
        sep[size_t(s) * s2 + t] = firstIsN1 ? pair.at(s, t) : pair.at(t, s);
    }
    return sep;
  }

  // Step j's cluster reduced to [strategy of its node][strategy of `other`].
  Matrix pairMarginal(int j, int other) const {
    const EliminationStep& st = plan_.steps[j];
    if (other != st.n1 && other != st.n2) {
      throw ShardingError("internal error: a fold's neighbours are not adjacent when folded");
    }
    int sv = strategies(st.node), s1 = strategies(st.n1), s2 = strategies(st.n2);
    bool isN1 = other == st.n1;
    Matrix out(sv, isN1 ? s1 : s2, kInfinity);
    for (int k = 0; k < sv; ++k) {
      for (int s = 0; s < s1; ++s) {
        for (int t = 0; t < s2; ++t) {
          double& o = out.at(k, isN1 ? s : t);
          o = std::min(o, cluster_[j][(size_t(k) * s1 + s) * s2 + t]);
        }
      }
    }
    return out;
  }

  const EliminationPlan& plan_;
  const Folded& f_;
  double optimum_;
  double cap_;
  const ResidualMarginal& residual_;
  std::vector<std::vector<double>> marginal_;
  std::vector<std::vector<double>> cluster_;  // Per step: [k][s][t].
};

}  // namespace

EliminationPlan planElimination(const CostGraph& graph, const std::vector<bool>& keep) {
  return PlanBuilder(graph, keep).run();
}

Folded fold(const EliminationPlan& plan, const CostGraph& graph,
            std::vector<std::vector<double>> cost) {
  Folded f;
  f.cost = std::move(cost);
  f.slots.reserve(plan.slotEnds.size());
  for (const CostGraph::Edge& e : graph.edges) f.slots.push_back(e.cost);
  for (size_t s = graph.edges.size(); s < plan.slotEnds.size(); ++s) {
    auto [u, v] = plan.slotEnds[s];
    f.slots.emplace_back(graph.strategies(u), graph.strategies(v), 0.0);
  }
  for (const EliminationStep& step : plan.steps) foldStep(plan, step, f);
  return f;
}

void backSubstitute(const EliminationPlan& plan, const Folded& folded, std::vector<int>& choice) {
  for (auto it = plan.steps.rbegin(); it != plan.steps.rend(); ++it) {
    int s = it->n1 >= 0 ? choice[it->n1] : 0, t = it->n2 >= 0 ? choice[it->n2] : 0;
    int best = 0;
    double bestCost = kInfinity;
    for (int k = 0; k < static_cast<int>(folded.cost[it->node].size()); ++k) {
      double c = localCost(plan, folded, *it, k, s, t);
      if (c < bestCost) {
        bestCost = c;
        best = k;
      }
    }
    choice[it->node] = best;
  }
}

std::vector<std::vector<double>> minMarginals(const EliminationPlan& plan, const Folded& folded,
                                              double optimum, double cap,
                                              const ResidualMarginal& residual) {
  return MarginalPass(plan, folded, optimum, cap, residual).run();
}

}  // namespace meshflow::passes::sharding
