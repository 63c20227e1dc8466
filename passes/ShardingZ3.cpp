#include "passes/ShardingZ3.h"

#include <fmt/format.h>
#include <z3++.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace meshflow::passes::sharding {

namespace {

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

// How memory is scaled to Z3's 32-bit pseudo-Boolean coefficients: by the power
// of two that makes every value an integer, when the largest then fits (exact);
// otherwise so that the largest is about 2^30, rounding memory up and the budget
// down (what Z3 accepts then still fits, but Z3 may miss answers that fit).
struct PbScale {
  int shift = 0;
  bool exact = true;
};

PbScale pbScale(const std::vector<double>& values) {
  PbScale scale;
  int lowest = std::numeric_limits<int>::max();
  double largest = 0.0;
  for (double v : values) {
    if (v <= 0) continue;
    int exponent = 0;
    double mantissa = std::frexp(v, &exponent);  // v = mantissa · 2^exponent
    auto bits = static_cast<uint64_t>(std::ldexp(mantissa, 53));
    lowest = std::min(lowest, exponent - 53 + std::countr_zero(bits));
    largest = std::max(largest, v);
  }
  if (largest == 0.0) return scale;
  scale.shift = -lowest;
  if (std::ldexp(largest, scale.shift) <= std::numeric_limits<int>::max()) return scale;
  int exponent = 0;
  std::frexp(largest, &exponent);
  scale.shift = 30 - exponent;
  scale.exact = false;
  return scale;
}

// Moves each edge's row and column minima into its endpoints' costs, and each
// node's minimum into the constant: the objective of every assignment is
// unchanged but most soft constraints get weight zero and vanish, which shortens
// MaxRes.
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
    r.constant += least;
  }
}

class Z3Model {
 public:
  Z3Model(const Residual& r, const Z3Limits& limits) : r_(r), opt_(ctx_) {
    z3::params params(ctx_);
    double ms = std::clamp(limits.timeBudgetSeconds * 1000.0, 1.0, 4.0e9);
    params.set("timeout", static_cast<unsigned>(ms));
    // The resource limit counts Z3's internal work, so where it stops does not
    // depend on the machine's speed or load (the optimiser's own parameter, set
    // on this solver only: no global Z3 state is touched).
    if (limits.resourceLimit > 0) {
      params.set("rlimit",
                 static_cast<unsigned>(std::min<uint64_t>(limits.resourceLimit, 0xffffffffu)));
    }
    opt_.set(params);
    declareChoices();
    addEdges();
    if (r.memoryActive) addMemory();
  }

  Z3Outcome solve() {
    Z3Outcome out;
    z3::check_result result = opt_.check();
    // With memory rounded, Z3 judges a tighter budget: its verdicts prove nothing.
    if (result == z3::unsat) {
      out.infeasible = exactMemory_;
      return out;
    }
    out.optimal = result == z3::sat && exactMemory_;
    // On a timeout the optimiser keeps the best model it found so far, if any.
    try {
      out.choice = readChoice(opt_.get_model());
    } catch (const z3::exception&) {
    }
    return out;
  }

 private:
  void addSoft(const z3::expr& violated, double weight) {
    opt_.add_soft(!violated, exactDecimal(weight).c_str());
  }

  void declareChoices() {
    for (size_t i = 0; i < r_.nodes.size(); ++i) {
      z3::expr_vector xs(ctx_);
      for (size_t k = 0; k < r_.cost[i].size(); ++k) {
        z3::expr x = ctx_.bool_const(fmt::format("x_{}_{}", i, k).c_str());
        xs.push_back(x);
        if (!std::isfinite(r_.cost[i][k])) {
          opt_.add(!x);
        } else if (r_.cost[i][k] > 0) {
          addSoft(x, r_.cost[i][k]);
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
          z3::expr both = x_[e.a][s] && x_[e.b][t];
          if (!std::isfinite(c)) {
            opt_.add(!both);
          } else if (c > 0) {
            addSoft(both, c);
          }
        }
      }
    }
  }

  // Memory is one pseudo-Boolean constraint, Z3's native form for a weighted sum
  // of 0-1 terms. (A sum of if-then-else integer terms, measured on 57 nodes,
  // made freeing the Z3 context take 1.6-4.6 s after a 1 s timeout; this frees at
  // once.)
  void addMemory() {
    std::vector<double> values{r_.budget};
    for (const auto& m : r_.memory) values.insert(values.end(), m.begin(), m.end());
    PbScale scale = pbScale(values);
    exactMemory_ = scale.exact;
    z3::expr_vector terms(ctx_);
    std::vector<int> coefficients;
    for (size_t i = 0; i < r_.nodes.size(); ++i) {
      for (size_t k = 0; k < r_.memory[i].size(); ++k) {
        if (r_.memory[i][k] == 0) continue;
        terms.push_back(x_[i][k]);
        coefficients.push_back(
            static_cast<int>(std::ceil(std::ldexp(r_.memory[i][k], scale.shift))));
      }
    }
    double bound = std::floor(std::ldexp(r_.budget, scale.shift));
    if (terms.empty()) return;
    if (bound < 0) {
      opt_.add(ctx_.bool_val(false));
      return;
    }
    bound = std::min(bound, double(std::numeric_limits<int>::max()));
    opt_.add(z3::pble(terms, coefficients.data(), static_cast<int>(bound)));
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
  bool exactMemory_ = true;
};

}  // namespace

Z3Outcome solveWithZ3(Residual residual, const Z3Limits& limits) {
  reparametrise(residual);
  return Z3Model(residual, limits).solve();
}

}  // namespace meshflow::passes::sharding
