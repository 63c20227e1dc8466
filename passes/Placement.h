// Placement: the stages' submesh shapes onto physical device ids, found by an
// ordered search when it can prove its answer best, else by Z3 (an exact-cover
// model, passes/PlacementEncoding.h).
//
// Devices are numbered node-major (device d sits in node d / M, as ir/Cluster.h).
// Every stage gets one contiguous range of ids:
// - a whole-node shape (n, M) takes n consecutive whole nodes;
// - a sub-node shape (1, m), m dividing M, takes m devices of one node starting
//   at an offset that is a multiple of m (packed, as Alpa places them).
// The ranges are disjoint, avoid every excluded device, and together cover every
// device that is not excluded. User pins put given device ids inside a stage.
//
// Among valid placements the solver first minimises the number of adjacent stage
// pairs that do not share a node (their activations then cross the network),
// then takes the lexicographically smallest list of first device ids, so the
// answer is deterministic.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "passes/StageSolver.h"

namespace meshflow::passes {

/// Stage `stage` must hold every device in `devices` (pin all of a stage's
/// devices to fix it completely).
struct PlacementPin {
  int stage = 0;
  std::vector<int> devices;
};

struct PlacementRequest {
  std::vector<SubmeshShape> stages;  ///< Submesh shapes, in pipeline order.
  std::vector<PlacementPin> pins;
  std::vector<int> excluded;  ///< Device ids no stage may use.
};

struct Placement {
  /// devices[s]: the device ids of stage s, ascending.
  std::vector<std::vector<int>> devices;
  /// Adjacent stage pairs that share no node.
  int crossNodeBoundaries = 0;
};

/// A request that cannot be met. For an unsatisfiable combination of hints the
/// message names the pins and exclusions that conflict (a minimal set of them).
class PlacementError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Places the stages of `request` on `cluster`'s devices. Throws PlacementError
/// for invalid shapes, pins or exclusions, when the shapes do not cover exactly
/// the devices left after exclusions, and when no placement honours the hints.
Placement placeStages(const ir::Cluster& cluster, const PlacementRequest& request);

}  // namespace meshflow::passes
