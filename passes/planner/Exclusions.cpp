#include "passes/planner/Exclusions.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "ir/Counted.h"
#include "ir/Plan.h"

namespace meshflow::passes {
namespace {

// Ascending ids as ranges: "0-5, 8, 10-11".
std::string idRanges(const std::vector<int>& ids) { return ir::idRanges(ids, ", "); }

std::string devicePinText(int stage) { return fmt::format("pin(stage = {}, devices = ...)", stage); }

// The exclusion that takes out each excluded device (the first one that names
// it), checking that every id lies in the cluster.
std::map<int, const DeviceExclusion*> excludedDevices(const ir::Cluster& cluster,
                                                      const PlanRequest& request) {
  const int perNode = int(cluster.devicesPerNode), nodes = int(cluster.nodes);
  std::map<int, const DeviceExclusion*> by;
  for (const DeviceExclusion& e : request.exclusions)
    for (int id : e.ids) {
      if (e.nodes && (id < 0 || id >= nodes))
        throw PlanningError(exclusionText(e),
                            fmt::format("{}: node {} is not in the {}-node cluster (nodes 0-{})",
                                        exclusionText(e), id, nodes, nodes - 1));
      if (!e.nodes && (id < 0 || id >= nodes * perNode))
        throw PlanningError(
            exclusionText(e), fmt::format("{}: device {} is not in the {}-device cluster (devices 0-{})",
                                          exclusionText(e), id, nodes * perNode, nodes * perNode - 1));
      int first = e.nodes ? id * perNode : id, end = e.nodes ? first + perNode : id + 1;
      for (int d = first; d < end; ++d) by.emplace(d, &e);
    }
  return by;
}

// A device pin may not name a device the plan leaves out.
void checkPins(const ir::Cluster& cluster, const PlanRequest& request, const UsableDevices& usable,
               const std::map<int, const DeviceExclusion*>& excluded) {
  const int total = int(cluster.deviceCount()), perNode = int(cluster.devicesPerNode);
  for (const DevicePin& pin : request.devicePins)
    for (int d : pin.devices) {
      std::string what = fmt::format("pin(stage = {}, devices = [{}])", pin.stage,
                                     fmt::join(pin.devices, ", "));
      if (d < 0 || d >= total)
        throw PlanningError(devicePinText(pin.stage),
                            fmt::format("{}: device {} is not in the {}-device cluster", what, d, total));
      if (usable.planning(d)) continue;
      if (auto it = excluded.find(d); it != excluded.end())
        throw PlanningError(devicePinText(pin.stage),
                            fmt::format("{} puts stage {} on device {}, which {} leaves out", what,
                                        pin.stage, d, exclusionText(*it->second)));
      // d is idle: some exclusion takes another device of its node.
      const DeviceExclusion* cause = excluded.lower_bound(d / perNode * perNode)->second;
      throw PlanningError(
          devicePinText(pin.stage),
          fmt::format("{} puts stage {} on device {}, which stays idle: {} takes part of node {} "
                      "out, and the planner uses only nodes no exclusion touches",
                      what, pin.stage, d, exclusionText(*cause), d / perNode));
    }
}

}  // namespace

int UsableDevices::physical(int device) const {
  const int perNode = int(cluster.devicesPerNode);
  return nodes[std::size_t(device / perNode)] * perNode + device % perNode;
}

std::optional<int> UsableDevices::planning(int device) const {
  const int perNode = int(cluster.devicesPerNode);
  for (std::size_t k = 0; k < nodes.size(); ++k)
    if (nodes[k] == device / perNode) return int(k) * perNode + device % perNode;
  return std::nullopt;
}

std::string exclusionText(const DeviceExclusion& exclusion) {
  return fmt::format("exclude({} = [{}])", exclusion.nodes ? "nodes" : "devices",
                     fmt::join(exclusion.ids, ", "));
}

UsableDevices usableDevices(const ir::Cluster& cluster, const PlanRequest& request) {
  const int perNode = int(cluster.devicesPerNode), nodes = int(cluster.nodes);
  std::map<int, const DeviceExclusion*> excluded = excludedDevices(cluster, request);
  UsableDevices usable;
  usable.cluster = cluster;
  usable.excludedCount = int(excluded.size());
  for (int k = 0; k < nodes; ++k) {
    auto touched = excluded.lower_bound(k * perNode);
    if (touched == excluded.end() || touched->first >= (k + 1) * perNode) {
      usable.nodes.push_back(k);
      continue;
    }
    for (int d = k * perNode; d < (k + 1) * perNode; ++d)
      if (!excluded.count(d)) usable.idle.push_back(d);
  }
  if (usable.nodes.empty()) {
    std::vector<std::string> hints;
    for (const DeviceExclusion& e : request.exclusions) hints.push_back(exclusionText(e));
    throw PlanningError(
        exclusionText(request.exclusions.front()),
        fmt::format("no node is left to plan on: {} touch{} all {} nodes of the {}x{} cluster, and "
                    "the planner uses only nodes no exclusion touches{}",
                    fmt::join(hints, ", "), hints.size() == 1 ? "es" : "", nodes, nodes, perNode,
                    usable.idle.empty() ? ""
                                        : fmt::format(" (devices {} would stay idle)",
                                                      idRanges(usable.idle))));
  }
  usable.cluster.nodes = std::int64_t(usable.nodes.size());
  checkPins(cluster, request, usable, excluded);
  return usable;
}

std::string exclusionNote(const ir::Cluster& cluster, const UsableDevices& usable) {
  std::string note = fmt::format("planned on {} of the {} ({}): {} excluded", usable.nodes.size(),
                                 ir::counted(cluster.nodes, "node"), idRanges(usable.nodes),
                                 ir::counted(std::int64_t(usable.excludedCount), "device"));
  if (!usable.idle.empty())
    note += fmt::format("; devices {} stay idle, as the planner uses only nodes no exclusion touches",
                        idRanges(usable.idle));
  return note;
}

}  // namespace meshflow::passes
