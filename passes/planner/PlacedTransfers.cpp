#include "passes/planner/PlacedTransfers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "passes/planner/StepReplay.h"
#include "passes/planner/StepTime.h"

namespace meshflow::passes {
namespace {

// One device's link to another, as the simulator takes it: the node's links
// inside a node, else the device's share of the node's network.
struct Links {
  const ir::Cluster& cluster;

  std::int64_t node(int device) const {
    return device / std::max<std::int64_t>(1, cluster.devicesPerNode);
  }
  double perDeviceNetwork() const {
    return cluster.interNode.bandwidth / double(std::max<std::int64_t>(1, cluster.devicesPerNode));
  }
  double seconds(int from, int to, double bytes) const {
    if (node(from) == node(to))
      return cluster.intraNode.latency + bytes * secondsPerByte(cluster.intraNode.bandwidth);
    return cluster.interNode.latency + bytes * secondsPerByte(perDeviceNetwork());
  }
  // The ring of `members` over the link lowering's group takes: the
  // network as soon as it spans nodes (as the simulator takes it).
  PlacedRing ringOf(const std::vector<int>& members) const {
    PlacedRing ring;
    ring.members = double(members.size());
    if (members.empty()) return ring;
    const bool spans = std::any_of(members.begin(), members.end(),
                                   [&](int d) { return node(d) != node(members[0]); });
    ring.bandwidth = spans ? perDeviceNetwork() : cluster.intraNode.bandwidth;
    ring.latency = spans ? cluster.interNode.latency : cluster.intraNode.latency;
    return ring;
  }
};

// The devices {base + k·stride : k < members} of a rank's device list.
std::vector<int> group(const std::vector<int>& devices, std::size_t base, std::size_t stride,
                       std::size_t members) {
  std::vector<int> out;
  for (std::size_t k = 0; k < members && base + k * stride < devices.size(); ++k)
    out.push_back(devices[base + k * stride]);
  return out;
}

// A rank's gradient synchronisation as lowering emits it (passes/Lowering.cpp,
// PlanPipeline.cpp): with replicas split over mesh dimension 0, device k of
// each replica all-reduces every gradient (reduce-scatter and all-gather when
// sharded: the same bytes), one ring per 25 MiB bucket; then each mesh sums
// what the strategies leave partial inside it.
PlacedSync syncOf(const Links& links, const StageEstimate& e, const MeshConfig& config, bool zero,
                  bool sameRows, const std::vector<int>& devices) {
  const std::size_t rows = std::size_t(config.view[0]), columns = std::size_t(config.view[1]);
  PlacedSync sync;
  sync.gradientBytes = e.gradients;
  if (sameRows) {
    if (rows > 1) {
      // The slowest of the groups of one device per replica.
      for (std::size_t k = 0; k < columns; ++k) {
        PlacedRing ring = links.ringOf(group(devices, k, columns, rows));
        if (k == 0 || ring.seconds(1, 1) > sync.replicas.seconds(1, 1)) sync.replicas = ring;
      }
      sync.sharded = zero;
      if (zero) sync.gradientBytes *= double(rows);
    }
    sync.insideMesh =
        links.ringOf(group(devices, 0, 1, columns)).seconds(e.syncBytes[2] + e.syncBytes[3], 2);
  } else {
    sync.insideMesh = links.ringOf(group(devices, 0, columns, rows)).seconds(e.syncBytes[1], 2) +
                      links.ringOf(group(devices, 0, 1, columns)).seconds(e.syncBytes[2], 2) +
                      links.ringOf(devices).seconds(e.syncBytes[3], 2);
  }
  return sync;
}

// Replica `r`'s mesh of a rank: devices[r·size, (r + 1)·size).
std::vector<int> meshOf(const std::vector<int>& devices, std::size_t size, std::size_t r) {
  return {devices.begin() + std::ptrdiff_t(r * size),
          devices.begin() + std::ptrdiff_t((r + 1) * size)};
}

// `bytes` (each sending replica's activation) from meshes of `from` to
// meshes of `to`, `replicas` of them each: the slowest sender's transfers, in
// turn on its comm stream, and the receivers' all-gather of tiles.
PlacedTransfer transferOf(const Links& links, const std::vector<int>& from,
                          const std::vector<int>& to, std::size_t replicas, double bytes) {
  const std::size_t senders = from.size() / replicas, receivers = to.size() / replicas;
  PlacedTransfer slowest;
  for (std::size_t r = 0; r < replicas; ++r) {
    std::vector<int> out = meshOf(from, senders, r), in = meshOf(to, receivers, r);
    for (std::size_t k = 0; k < senders; ++k) {
      double seconds = 0;
      if (senders == receivers) {
        seconds = links.seconds(out[k], in[k], bytes);
      } else {
        for (std::size_t j = k; j < receivers; j += senders)
          seconds += links.seconds(out[k], in[j], bytes / double(receivers));
      }
      slowest.send = std::max(slowest.send, seconds);
    }
    if (senders != receivers)
      slowest.gather = std::max(slowest.gather, links.ringOf(in).seconds(bytes, 1));
  }
  return slowest;
}

}  // namespace

void sumRanks(Candidate& c, int ranks) {
  c.ranks.assign(std::size_t(ranks), StageEstimate{});
  if (c.chunks == 1) {
    for (std::size_t k = 0; k < c.stages.size(); ++k) c.ranks[k] = c.stages[k].estimate;
  } else {
    for (std::size_t k = 0; k < c.stages.size(); ++k) {
      const StageEstimate& e = c.stages[k].estimate;
      StageEstimate& rank = c.ranks[std::size_t(c.rankOf(k))];
      const double workspace = std::max(rank.workspace, e.workspace);
      rank += e;
      rank.workspace = workspace;
      rank.transferSeconds += e.transferSeconds;
      rank.feasible = true;
    }
  }
  c.stepTime = stepSeconds(c.schedule, c.chunks, c.microbatches, c.ranks);
}

void priceTransfersOnDevices(Candidate& c, const std::vector<std::vector<int>>& devices,
                             const std::vector<MeshConfig>& configs, const ir::Cluster& cluster) {
  const Links links{cluster};
  const int ranks = int(c.ranks.size());
  // Lowering splits replicas over mesh dimension 0 only when every rank has
  // the same number of rows; otherwise each rank is one mesh (PlanPipeline).
  bool sameRows = true;
  for (const StageChoice& s : c.stages)
    sameRows = sameRows && configs[s.config].view[0] == configs[c.stages[0].config].view[0];
  const std::size_t replicas = sameRows ? std::size_t(configs[c.stages[0].config].view[0]) : 1;
  // Each data-parallel row of a sender sends its share (PlanBuilder's
  // activationBytes); a rank sends the largest of its chunks' (lowering).
  std::vector<double> sent(std::size_t(ranks), 0);
  for (std::size_t k = 1; k < c.stages.size(); ++k) {
    double& bytes = sent[std::size_t(c.rankOf(k - 1))];
    bytes = std::max(bytes, c.stages[k].estimate.transferIn /
                                double(configs[c.stages[k - 1].config].view[0]));
  }
  PlacedCosts placed;
  placed.activation.assign(c.stages.size(), {});
  placed.gradient.assign(c.stages.size(), {});
  for (std::size_t k = 1; k < c.stages.size(); ++k) {
    StageEstimate& e = c.stages[k].estimate;
    const std::size_t fromRank = std::size_t(c.rankOf(k - 1)), toRank = std::size_t(c.rankOf(k));
    if (fromRank != toRank && e.transferIn > 0) {
      placed.activation[k] =
          transferOf(links, devices[fromRank], devices[toRank], replicas, sent[fromRank]);
      placed.gradient[k] =
          transferOf(links, devices[toRank], devices[fromRank], replicas, sent[fromRank]);
    }
    const double seconds = placed.activation[k].seconds();
    e.forward += seconds - e.transferSeconds;
    e.backward += seconds - e.transferSeconds;
    e.transferSeconds = seconds;
  }
  for (std::size_t k = 0; k < c.stages.size(); ++k) {
    StageChoice& s = c.stages[k];
    const PlacedSync sync = syncOf(links, s.estimate, configs[s.config], s.variant.zero, sameRows,
                                   devices[std::size_t(c.rankOf(k))]);
    s.estimate.parameterSync = sync.seconds();
  }
  sumRanks(c, ranks);
  // The rank's synchronisation as the replay runs it: its chunks' gradients
  // together.
  for (int r = 0; r < ranks; ++r) {
    bool zero = false;
    std::size_t first = c.stages.size();
    for (std::size_t k = 0; k < c.stages.size(); ++k)
      if (c.rankOf(k) == r) {
        zero = zero || c.stages[k].variant.zero;
        first = std::min(first, k);
      }
    placed.sync.push_back(syncOf(links, c.ranks[std::size_t(r)], configs[c.stages[first].config],
                                 zero, sameRows, devices[std::size_t(r)]));
  }
  if (std::optional<double> step = replayStep(c, placed)) c.stepTime = *step;
}

}  // namespace meshflow::passes
