// Internal to solveSharding: the canonical answer among equal optima.
//
// A problem can have many optimal choices, and which one a search meets first
// depends on the path (branch and bound, the Lagrangian search, the order of
// the edges). The answer is therefore the lexicographically smallest choice
// vector whose objective is within the optimum's tolerance: node 0's strategy as
// low as possible, then node 1's, and so on. It is found greedily, one query per
// (node, lower strategy) that a lower bound cannot rule out; with exact
// min-marginals as bounds, a problem with a unique optimum needs no query at all.
#pragma once

#include <functional>
#include <optional>
#include <vector>

namespace meshflow::passes::sharding {

/// A choice with objective at most the cap among those `cost` allows (infinity
/// rules a strategy out), or nothing; sets `settled` to false when the search
/// gave up before deciding.
using WithinCap = std::function<std::optional<std::vector<int>>(
    const std::vector<std::vector<double>>& cost, bool& settled)>;

/// Whether a full choice is within the cap (and the budget).
using Acceptable = std::function<bool(const std::vector<int>& choice)>;

/// The lexicographically smallest choice that `query` accepts, starting from
/// `incumbent` (which it accepts). `bounds[i][k]` bounds from below the objective
/// of any choice with node i on strategy k (+infinity: none within the cap).
/// Before searching, a lower strategy is tried on its own (the rest unchanged):
/// most ties are settled so. Returns nothing when a query was not settled.
std::optional<std::vector<int>> lexicographicallySmallest(
    const std::vector<std::vector<double>>& cost, std::vector<int> incumbent,
    const std::vector<std::vector<double>>& bounds, double cap, const Acceptable& acceptable,
    const WithinCap& query);

}  // namespace meshflow::passes::sharding
