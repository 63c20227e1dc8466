#include "passes/ShardingCanonical.h"

#include <cmath>
#include <limits>

namespace meshflow::passes::sharding {

namespace {

void hold(std::vector<std::vector<double>>& cost, size_t node, int k) {
  for (size_t j = 0; j < cost[node].size(); ++j) {
    if (static_cast<int>(j) != k) cost[node][j] = std::numeric_limits<double>::infinity();
  }
}

}  // namespace

std::optional<std::vector<int>> lexicographicallySmallest(
    const std::vector<std::vector<double>>& cost, std::vector<int> incumbent,
    const std::vector<std::vector<double>>& bounds, double cap, const Acceptable& acceptable,
    const WithinCap& query) {
  // Nodes before i are held on the strategies already chosen for them.
  std::vector<std::vector<double>> held = cost;
  for (size_t i = 0; i < incumbent.size(); ++i) {
    for (int k = 0; k < incumbent[i]; ++k) {
      if (!std::isfinite(held[i][k]) || !(bounds[i][k] <= cap)) continue;
      std::vector<int> moved = incumbent;
      moved[i] = k;
      if (acceptable(moved)) {
        incumbent = std::move(moved);
        break;
      }
      std::vector<std::vector<double>> trial = held;
      hold(trial, i, k);
      bool settled = true;
      std::optional<std::vector<int>> found = query(trial, settled);
      if (!settled) return std::nullopt;
      if (found) {
        incumbent = std::move(*found);
        break;
      }
    }
    hold(held, i, incumbent[i]);
  }
  return incumbent;
}

}  // namespace meshflow::passes::sharding
