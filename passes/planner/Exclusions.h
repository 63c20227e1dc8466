// The devices a plan may use once exclude(...) hints take some out
// (docs/planning.md, "Exclusions"). The stage search counts devices in whole
// nodes, so it plans on the nodes no exclusion touches, renumbered 0, 1, … as
// a smaller cluster of the same nodes; placement works on that cluster too, and
// its device ids map back to physical ones. A stage may therefore span nodes
// on both sides of an excluded one. The other devices of a node an exclusion
// takes part of stay idle.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/Cluster.h"
#include "passes/Planner.h"

namespace meshflow::passes {

struct UsableDevices {
  ir::Cluster cluster;     ///< The nodes left, renumbered from 0.
  std::vector<int> nodes;  ///< nodes[k]: the physical node of node k of `cluster`.
  std::vector<int> idle;   ///< Devices not excluded that stay idle, ascending.
  int excludedCount = 0;   ///< Devices the exclusions name, each once.

  /// The physical id of device `device` of `cluster`.
  int physical(int device) const;
  /// The id in `cluster` of physical device `device`; none when it is not usable.
  std::optional<int> planning(int device) const;
  /// Whether any exclusion applies (then `cluster` may be smaller).
  bool restricted() const { return excludedCount > 0; }
};

/// `exclude(devices = [6, 7])` or `exclude(nodes = [3])`, as PlanningError names it.
std::string exclusionText(const DeviceExclusion& exclusion);

/// The usable part of `cluster` under the request's exclusions. Throws a
/// PlanningError naming the hint for a device or node outside the cluster, for
/// exclusions that leave no node whole, and for a device pin on a device that
/// is excluded or stays idle.
UsableDevices usableDevices(const ir::Cluster& cluster, const PlanRequest& request);

/// The note a plan carries when exclusions apply: the nodes it uses, the
/// devices excluded and those left idle.
std::string exclusionNote(const ir::Cluster& cluster, const UsableDevices& usable);

}  // namespace meshflow::passes
