// Internal to solveSharding: a mixed-integer linear program handed to COIN-OR
// CBC (Debian's coinor-libcbc-dev, the solver Alpa uses), through its C++ API
// (CBC's own driver on a CbcModel over Clp, with an event handler that stops
// it from another thread). Built column by column; solved single-threaded,
// which makes CBC deterministic for the same model and limits (a wall-clock
// limit or a stop that ends the search is the exception: how far it got
// depends on the machine).
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace meshflow::passes::sharding {

struct MilpLimits {
  double seconds = 10.0;  ///< Wall clock; when it runs out the best answer so far.
  uint64_t nodes = 0;     ///< Branch-and-bound nodes (deterministic); 0 = no limit.
  /// When set (by another thread), CBC stops at its next event: a node done, a
  /// heuristic pass, a solution found. Null: never.
  const std::atomic<bool>* stop = nullptr;
  /// Every answer must have an objective below this (CBC's cutoff): an answer
  /// already in hand prunes CBC's tree from the start. CBC is given no start,
  /// only the bound, so its root heuristics still run. Infinity: none.
  double cutoff = std::numeric_limits<double>::infinity();
};

struct MilpResult {
  std::optional<std::vector<double>> values;  ///< Per column; none when no answer was found.
  double bound = -std::numeric_limits<double>::infinity();  ///< A proven lower bound.
  bool optimal = false;                                     ///< CBC proved `values` optimal.
  /// CBC proved that no answer exists (below the cutoff, when one was given).
  bool infeasible = false;
  bool stopped = false;  ///< Stopped through MilpLimits::stop (then never optimal).
  /// Not handed to CBC: an objective coefficient or matrix entry of 1e20 or
  /// more in magnitude (Clp aborts on objective coefficients from 1e25). The
  /// fast path alone answers such a problem.
  bool outOfRange = false;
};

class Milp {
 public:
  /// Adds a row lower ≤ Σ coefficient · column ≤ upper; returns its index.
  int addRow(double lower, double upper);
  /// Adds a column with an objective coefficient and bounds, binary when
  /// `integer` (bounds 0..1), and its coefficients in earlier rows.
  int addColumn(double objective, double upper, bool integer,
                const std::vector<std::pair<int, double>>& entries);
  int columns() const { return static_cast<int>(objective_.size()); }
  /// Every objective coefficient and matrix entry below 1e20 in magnitude
  /// (bounds may be anything: Clp reads 1e20 and more as infinite).
  bool withinClpRange() const;
  int rows() const { return static_cast<int>(rowLower_.size()); }

  /// Minimises within the limits. One solve runs at a time in the process (CBC's
  /// driver is not reentrant); a solve waiting for another loses the time it waits.
  MilpResult solve(const MilpLimits& limits) const;

 private:
  std::vector<double> rowLower_, rowUpper_;
  std::vector<double> objective_, columnUpper_;
  std::vector<bool> integer_;
  std::vector<int> start_{0};  // CSC column starts.
  std::vector<int> index_;
  std::vector<double> value_;
};

}  // namespace meshflow::passes::sharding
