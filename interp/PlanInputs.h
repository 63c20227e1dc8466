// What plan(...) hands the planner: a cluster declaration as an ir::Cluster
// and a schedule block as a passes::PlanRequest (docs/planning.md, "Planning
// from a script").
#pragma once

#include <string>

#include "interp/Handles.h"
#include "ir/Cluster.h"
#include "passes/Planner.h"

namespace meshflow::interp {

/// The ir::Cluster of a validated cluster declaration. Declarations give every
/// link per device (stdlib/clusters.mesh: a DGX A100's network is 25 GB/s per
/// GPU), while ir::Cluster's inter-node link is the node's network interface,
/// shared by its devices: its bandwidth is the declared one × devices_per_node.
ir::Cluster clusterOf(const ClusterObject& cluster);

/// Adds the hints, bounds and pins of `schedule` to `request`. Hints the block
/// leaves out or sets to `auto` leave `request` as it was. The optimizer sets
/// the optimizer state per parameter: adam and adamw keep 2 copies, sgd with
/// momentum 1, plain sgd none. Pins become layer, op-sharding and device pins,
/// exclude(...) calls device exclusions.
void applySchedule(const ScheduleObject& schedule, passes::PlanRequest& request);

/// `pin(layers = 0..4, stage = 0)`: pin `index` of `schedule` as written.
std::string pinText(const ScheduleObject& schedule, std::size_t index);

/// Where `schedule` wrote the hint a PlanningError names: a hint or bound by
/// name (`memory_per_device`), a pin by its text (spaces and quotes do not
/// matter; `...` stands for any part), or an exclusion by its text with the ids
/// listed (`exclude(devices = [6, 7])`). An invalid span when the schedule has
/// no such hint.
SourceSpan hintSpan(const ScheduleObject& schedule, const std::string& hint);

}  // namespace meshflow::interp
