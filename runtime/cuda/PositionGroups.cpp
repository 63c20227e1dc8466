#include "runtime/cuda/PositionGroups.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace meshflow::runtime::cuda {

std::vector<std::int32_t> PositionGroups::packed() const {
  std::vector<std::int32_t> all;
  all.reserve(order.size() + starts.size() + ids.size());
  all.insert(all.end(), order.begin(), order.end());
  all.insert(all.end(), starts.begin(), starts.end());
  all.insert(all.end(), ids.begin(), ids.end());
  return all;
}

PositionGroups groupPositions(std::span<const std::int32_t> ids) {
  if (ids.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    throw std::invalid_argument("an embedding gradient of 2^31 positions or more");
  PositionGroups g;
  g.order.resize(ids.size());
  std::iota(g.order.begin(), g.order.end(), 0);
  std::stable_sort(g.order.begin(), g.order.end(), [&](std::int32_t a, std::int32_t b) { return ids[a] < ids[b]; });
  for (std::size_t k = 0; k < g.order.size(); ++k) {
    const std::int32_t id = ids[g.order[k]];
    if (g.ids.empty() || g.ids.back() != id) {
      g.ids.push_back(id);
      g.starts.push_back(static_cast<std::int32_t>(k));
    }
  }
  g.starts.push_back(static_cast<std::int32_t>(g.order.size()));
  return g;
}

}  // namespace meshflow::runtime::cuda
