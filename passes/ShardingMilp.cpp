#include "passes/ShardingMilp.h"

#include <cmath>
#include <limits>

namespace meshflow::passes::sharding {

namespace {

// The rows and the node columns of the program, then the edge columns.
class ResidualProgram {
 public:
  explicit ResidualProgram(const Residual& r) : r_(r) {
    for (size_t i = 0; i < r.nodes.size(); ++i) oneHot_.push_back(milp_.addRow(1.0, 1.0));
    for (const Residual::Edge& e : r.edges) {
      firstRow_.push_back(milp_.rows());
      for (size_t s = 0; s < r.cost[e.a].size(); ++s) milp_.addRow(0.0, 0.0);
      for (size_t t = 0; t < r.cost[e.b].size(); ++t) milp_.addRow(0.0, 0.0);
    }
    // The residual's budget is what the folded nodes leave, summed in another
    // order than the answer is judged in: the row has the tolerance, so that a
    // choice on the budget exactly is not cut off by rounding (the answer is
    // then judged exactly, and one over the budget is discarded).
    if (r.memoryActive) {
      memoryRow_ = milp_.addRow(-std::numeric_limits<double>::max(), r.budget + tolerance(r.budget));
    }
    addNodeColumns();
    for (size_t e = 0; e < r.edges.size(); ++e) addEdgeColumns(e);
  }

  const Milp& milp() const { return milp_; }

  std::vector<int> choice(const std::vector<double>& values) const {
    std::vector<int> c(r_.nodes.size(), 0);
    for (size_t i = 0; i < c.size(); ++i) {
      for (size_t k = 0; k < column_[i].size(); ++k) {
        if (values[column_[i][k]] > values[column_[i][c[i]]]) c[i] = static_cast<int>(k);
      }
    }
    return c;
  }

 private:
  // Node i's column for strategy k: in its one-hot row, in the marginal row of
  // every edge at i (−1: the edge's pairs with i on k sum to it), in the memory
  // row (as given: scaled to numbers near 1, the row measured far worse for
  // CBC's heuristics, no answer better than the start in 10 s on a layered DAG).
  void addNodeColumns() {
    std::vector<std::vector<std::pair<int, int>>> marginalRows(r_.nodes.size());
    for (size_t e = 0; e < r_.edges.size(); ++e) {
      marginalRows[r_.edges[e].a].push_back({firstRow_[e], 0});
      int rowsOfA = static_cast<int>(r_.cost[r_.edges[e].a].size());
      marginalRows[r_.edges[e].b].push_back({firstRow_[e], rowsOfA});
    }
    column_.resize(r_.nodes.size());
    for (size_t i = 0; i < r_.nodes.size(); ++i) {
      for (size_t k = 0; k < r_.cost[i].size(); ++k) {
        std::vector<std::pair<int, double>> entries{{oneHot_[i], 1.0}};
        for (auto [row, offset] : marginalRows[i]) entries.push_back({row + offset + int(k), -1.0});
        if (memoryRow_ >= 0 && !r_.memory[i].empty()) {
          entries.push_back({memoryRow_, r_.memory[i][k]});
        }
        bool allowed = std::isfinite(r_.cost[i][k]);
        column_[i].push_back(
            milp_.addColumn(allowed ? r_.cost[i][k] : 0.0, allowed ? 1.0 : 0.0, true, entries));
      }
    }
  }

  void addEdgeColumns(size_t e) {
    const Residual::Edge& edge = r_.edges[e];
    int rowsOfA = edge.cost.rows;
    for (int s = 0; s < edge.cost.rows; ++s) {
      for (int t = 0; t < edge.cost.cols; ++t) {
        double c = edge.cost.at(s, t);
        if (!std::isfinite(c)) continue;
        milp_.addColumn(c, 1.0, true, {{firstRow_[e] + s, 1.0}, {firstRow_[e] + rowsOfA + t, 1.0}});
      }
    }
  }

  const Residual& r_;
  Milp milp_;
  std::vector<int> oneHot_;
  std::vector<int> firstRow_;  // Per edge: its rows for a's strategies, then b's.
  int memoryRow_ = -1;
  std::vector<std::vector<int>> column_;  // Per node and strategy.
};

}  // namespace

double cutoffAbove(double residualObjective) {
  // CBC sums the objective in its own order: a margin well above rounding.
  return residualObjective + 1e3 * tolerance(residualObjective);
}

MilpOutcome solveResidualMilp(const Residual& residual, const MilpLimits& limits) {
  ResidualProgram program(residual);
  MilpResult r = program.milp().solve(limits);
  MilpOutcome out;
  out.optimal = r.optimal && r.values.has_value();
  bool cut = std::isfinite(limits.cutoff);
  out.infeasible = r.infeasible && !cut;
  out.nothingBelowCutoff = r.infeasible && cut;
  out.bound = out.nothingBelowCutoff ? limits.cutoff : r.bound;
  if (r.values) out.choice = program.choice(*r.values);
  return out;
}

}  // namespace meshflow::passes::sharding
