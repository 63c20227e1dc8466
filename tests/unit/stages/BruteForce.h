// An exhaustive reference for the stage DP: every split of the layers into
// consecutive stages, every submesh and config per stage, kept when the
// submeshes really tile the cluster (checked by packing, not by counting) and
// every stage's max_n_succ_stages holds. Exponential; for tables of a few layers.
#pragma once

#include <algorithm>
#include <functional>
#include <limits>
#include <vector>

#include "passes/StageSolver.h"

namespace meshflow::passes::testing {

// Packs sub-node pieces into `free` nodes of `capacity` devices, exactly.
inline bool packs(std::vector<int> pieces, int free, int capacity) {
  std::sort(pieces.rbegin(), pieces.rend());
  std::vector<int> room(free, capacity);
  std::function<bool(std::size_t)> place = [&](std::size_t k) {
    if (k == pieces.size())
      return std::all_of(room.begin(), room.end(), [](int r) { return r == 0; });
    for (std::size_t b = 0; b < room.size(); ++b) {
      if (room[b] < pieces[k]) continue;
      // Nodes with equal room are interchangeable; try only the first.
      if (std::find(room.begin(), room.begin() + b, room[b]) != room.begin() + b) continue;
      room[b] -= pieces[k];
      if (place(k + 1)) return true;
      room[b] += pieces[k];
    }
    return false;
  };
  return place(0);
}

inline bool tiles(const StageProblem& p, const std::vector<Stage>& stages) {
  int wholeNodes = 0;
  std::vector<int> pieces;
  for (const Stage& s : stages) {
    SubmeshShape shape = p.submeshes[s.submesh];
    if (shape.devicesPerNode == p.devicesPerNode)
      wholeNodes += shape.nodes;
    else
      pieces.push_back(shape.devicesPerNode);
  }
  return wholeNodes <= p.nodes && packs(pieces, p.nodes - wholeNodes, p.devicesPerNode);
}

inline bool limitsHold(const StageProblem& p, const std::vector<Stage>& stages) {
  if (p.maxSuccStages.empty()) return true;
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const Stage& s = stages[k];
    int successors = static_cast<int>(stages.size() - 1 - k);
    if (successors > p.maxSuccStages[p.index(s.firstLayer, s.endLayer - 1, s.submesh, s.config)])
      return false;
  }
  return true;
}

inline double planCost(const StageProblem& p, const std::vector<Stage>& stages) {
  double sum = 0, worst = 0;
  for (const Stage& s : stages) {
    sum += s.latency;
    worst = std::max(worst, s.latency);
  }
  return sum + (p.microbatches - 1) * worst;
}

/// The least cost over all feasible plans; +inf when there is none.
inline double bruteForceCost(const StageProblem& p) {
  const int devices = p.nodes * p.devicesPerNode;
  double best = std::numeric_limits<double>::infinity();
  std::vector<Stage> stages;
  std::function<void(int, int)> extend = [&](int layer, int used) {
    if (layer == p.layers) {
      if (used == devices && tiles(p, stages) && limitsHold(p, stages))
        best = std::min(best, planCost(p, stages));
      return;
    }
    for (int j = layer; j < p.layers; ++j)
      for (int s = 0; s < static_cast<int>(p.submeshes.size()); ++s) {
        int size = p.submeshes[s].devices();
        if (used + size > devices) continue;
        for (int g = 0; g < p.configs; ++g) {
          double c = p.at(layer, j, s, g);
          if (c == StageProblem::kInfeasible) continue;
          stages.push_back(Stage{layer, j + 1, s, g, c});
          extend(j + 1, used + size);
          stages.pop_back();
        }
      }
  };
  extend(0, 0);
  return best;
}

}  // namespace meshflow::passes::testing
