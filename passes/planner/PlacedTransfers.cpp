#include "passes/planner/PlacedTransfers.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

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
      return cluster.intraNode.latency + bytes / cluster.intraNode.bandwidth;
    return cluster.interNode.latency + bytes / perDeviceNetwork();
  }
  // A ring all-gather ending with `bytes` on each member (passes/Collectives.h).
  double allGather(const std::vector<int>& members, double bytes) const {
    return ring(members, bytes, 1, 1);
  }
  // A ring all-reduce of `bytes` in `rounds` collectives (buckets).
  double allReduce(const std::vector<int>& members, double bytes, double rounds) const {
    return ring(members, bytes, 2, rounds);
  }
  // `passes` ring passes over `members` (1: gather or scatter, 2: all-reduce),
  // each with its latency in every one of `rounds` collectives; the group's
  // link is the network as soon as it spans nodes (as the simulator takes it).
  double ring(const std::vector<int>& members, double bytes, double passes, double rounds) const {
    const double n = double(members.size());
    if (n < 2 || bytes <= 0) return 0;
    bool spans = std::any_of(members.begin(), members.end(),
                             [&](int d) { return node(d) != node(members[0]); });
    const double bandwidth = spans ? perDeviceNetwork() : cluster.intraNode.bandwidth;
    const double latency = spans ? cluster.interNode.latency : cluster.intraNode.latency;
    return passes * (n - 1) / n * bytes / bandwidth + passes * (n - 1) * latency * rounds;
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

// A stage's gradient synchronisation as lowering emits it (passes/Lowering.cpp,
// PlanPipeline.cpp): with replicas split over mesh dimension 0, device k of
// each replica all-reduces every gradient (reduce-scatter and all-gather when
// sharded: the same bytes), one ring per 25 MiB bucket; then each mesh sums
// what the strategies leave partial inside it.
double syncSeconds(const Links& links, const StageEstimate& e, const MeshConfig& config, bool zero,
                   bool sameRows, const std::vector<int>& devices) {
  constexpr double kBucketBytes = double(std::int64_t{25} << 20);
  const std::size_t rows = std::size_t(config.view[0]), columns = std::size_t(config.view[1]);
  double seconds = 0;
  if (sameRows) {
    if (rows > 1) {
      const double bytes = zero ? e.gradients * double(rows) : e.gradients;
      const double buckets = std::clamp(std::ceil(bytes / kBucketBytes), 1.0, 1024.0);
      for (std::size_t k = 0; k < columns; ++k)
        seconds =
            std::max(seconds, links.allReduce(group(devices, k, columns, rows), bytes, buckets));
    }
    seconds += links.allReduce(group(devices, 0, 1, columns), e.syncBytes[2] + e.syncBytes[3], 1);
  } else {
    seconds += links.allReduce(group(devices, 0, columns, rows), e.syncBytes[1], 1);
    seconds += links.allReduce(group(devices, 0, 1, columns), e.syncBytes[2], 1);
    seconds += links.allReduce(devices, e.syncBytes[3], 1);
  }
  return seconds;
}

// Replica `r`'s mesh of a rank: devices[r·size, (r + 1)·size).
std::vector<int> meshOf(const std::vector<int>& devices, std::size_t size, std::size_t r) {
  return {devices.begin() + std::ptrdiff_t(r * size),
          devices.begin() + std::ptrdiff_t((r + 1) * size)};
}

// `bytes` (each sending replica's activation) from meshes of `from` to
// meshes of `to`, `replicas` of them each: the slowest sender's transfers, in
// turn on its comm stream, then the receivers' all-gather of tiles.
double transferSeconds(const Links& links, const std::vector<int>& from, const std::vector<int>& to,
                       std::size_t replicas, double bytes) {
  const std::size_t senders = from.size() / replicas, receivers = to.size() / replicas;
  double slowest = 0;
  for (std::size_t r = 0; r < replicas; ++r) {
    std::vector<int> out = meshOf(from, senders, r), in = meshOf(to, receivers, r);
    double replica = 0;
    for (std::size_t k = 0; k < senders; ++k) {
      double seconds = 0;
      if (senders == receivers) {
        seconds = links.seconds(out[k], in[k], bytes);
      } else {
        for (std::size_t j = k; j < receivers; j += senders)
          seconds += links.seconds(out[k], in[j], bytes / double(receivers));
      }
      replica = std::max(replica, seconds);
    }
    if (senders != receivers) replica += links.allGather(in, bytes);
    slowest = std::max(slowest, replica);
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
  for (std::size_t k = 1; k < c.stages.size(); ++k) {
    StageEstimate& e = c.stages[k].estimate;
    const int fromRank = c.rankOf(k - 1), toRank = c.rankOf(k);
    double seconds = 0;
    if (fromRank != toRank && e.transferIn > 0) {
      // Each data-parallel row of the sender sends its share (PlanBuilder's activationBytes).
      const double bytes = e.transferIn / double(configs[c.stages[k - 1].config].view[0]);
      seconds = transferSeconds(links, devices[std::size_t(fromRank)], devices[std::size_t(toRank)],
                                replicas, bytes);
    }
    e.forward += seconds - e.transferSeconds;
    e.backward += seconds - e.transferSeconds;
    e.transferSeconds = seconds;
  }
  for (std::size_t k = 0; k < c.stages.size(); ++k) {
    StageChoice& s = c.stages[k];
    s.estimate.parameterSync = syncSeconds(links, s.estimate, configs[s.config], s.variant.zero,
                                           sameRows, devices[std::size_t(c.rankOf(k))]);
  }
  sumRanks(c, ranks);
}

}  // namespace meshflow::passes
