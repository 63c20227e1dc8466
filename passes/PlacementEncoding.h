// The parts of placement (passes/Placement.h) that its ordered search, its Z3
// model and its tests share: the geometry of valid starts, the crossing count
// and its lower bound, and the Z3 exact-cover model itself, which the tests and
// bench/bench_placement.cpp also call alone. Nothing here checks its input:
// every function takes a request placeStages has already validated.
#pragma once

#include <vector>

#include "passes/Placement.h"

namespace meshflow::passes::placement {

/// The first ids a stage of `shape` may start at, ascending: the first id of
/// every run of n whole nodes for (n, M); every offset that is a multiple of m in
/// every node for (1, m).
std::vector<int> startsOf(const ir::Cluster& cluster, SubmeshShape shape);

/// Adjacent stage pairs that share no node when stage s starts at starts[s].
int countCrossings(const ir::Cluster& cluster, const std::vector<SubmeshShape>& stages,
                   const std::vector<int>& starts);

/// A count no placement of `stages` goes below: every pair with a whole-node
/// stage crosses, and a run of consecutive sub-node stages holding D devices
/// spans at least ceil(D / M) nodes, so it crosses at least one less than that.
int crossingsLowerBound(const ir::Cluster& cluster, const std::vector<SubmeshShape>& stages);

/// What a search learnt before leaving a request to Z3.
struct Seed {
  int fewestCrossings = 0;  ///< No placement has fewer crossings.
  std::vector<int> starts;  ///< The first ids of some valid placement, or none.
};

/// Solves a validated request with Z3: one boolean per (stage, start), each
/// stage placed exactly once, each device covered at most once (exactly once
/// when every exclusion holds). Throws PlacementError naming a minimal set of
/// conflicting pins and exclusions when there is no placement.
Placement solveExactCover(const ir::Cluster& cluster, const PlacementRequest& request,
                          const Seed& seed = {});

}  // namespace meshflow::passes::placement
