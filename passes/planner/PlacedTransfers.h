// A candidate's activation transfers priced on the devices placement gave it.
//
// The stage search prices the activation entering a stage before anything is
// placed, from the receiving submesh's shape alone. Once the ranks have device
// ids, each transfer is priced as lowering sends it and the simulator runs it
// (passes/Lowering.cpp, runtime/sim): every device of a sending mesh sends its
// replica's activation (or tiles of it, when the meshes differ in size) to its
// counterpart in the receiving mesh, over the link between those two devices —
// NVLink inside a node, the device's share of the node's network across nodes
// — and a receiver of tiles all-gathers them over its mesh. A sub-node stage
// whose neighbour sits on another node pays the network, not the node's links.
#pragma once

#include <vector>

#include "ir/Cluster.h"
#include "passes/planner/Candidate.h"

namespace meshflow::passes {

/// Sums `c.stages` into `c.ranks` as the schedule places the chunks (a rank's
/// chunks recompute one backward at a time, so it keeps the larger workspace)
/// and recomputes `c.stepTime`.
void sumRanks(Candidate& c, int ranks);

/// Re-prices the transfer into every virtual stage of `c` and its gradient
/// synchronisation on `devices` (per pipeline rank, in logical-mesh order; ids
/// node-major in `cluster`), as lowering emits them — the replicas of mesh
/// dimension 0 all-reduce every gradient, in buckets, and each mesh sums what
/// its strategies leave partial inside it — then sums the ranks and the step
/// time again.
void priceTransfersOnDevices(Candidate& c, const std::vector<std::vector<int>>& devices,
                             const std::vector<MeshConfig>& configs, const ir::Cluster& cluster);

}  // namespace meshflow::passes
