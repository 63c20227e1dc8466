// The step time of a placed candidate, found by replaying every pipeline rank's
// schedule action by action on its three streams — compute, comm and grad — as
// lowering emits the step and the simulator runs it (passes/Lowering.cpp,
// runtime/sim/Simulator.h), with one representative device per rank whose
// transfers and collectives are the slowest of its devices'.
//
// The closed forms of StepTime.h price a candidate during the search (O(p) a
// candidate); they cannot see how a schedule's order meets transfers longer
// than a stage's compute, tiles gathered on the comm stream behind the
// rank's own sends, or the buckets of the last backward. Once a candidate is
// placed, this replay (O(p·m·v)) prices it for the plan, as RankMemory.h's
// replay gives the plan's memory where the search used StageEstimate::memory.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "ir/Cluster.h"
#include "passes/planner/Candidate.h"

namespace meshflow::passes {

/// Seconds a byte takes at `bandwidth` bytes per second; a link of bandwidth
/// 0 is free, as ir::Cluster and the simulator take it.
inline double secondsPerByte(double bandwidth) { return bandwidth > 0 ? 1 / bandwidth : 0; }

/// One direction of a transfer between two pipeline ranks, as placed: the
/// slowest sending device's SENDs in turn on its comm stream, then the
/// receiving mesh's all-gather of the tiles (0 when the meshes match).
struct PlacedTransfer {
  double send = 0;
  double gather = 0;
  double seconds() const { return send + gather; }
};

/// A ring collective's group as placed: its members and the link it runs on
/// (the network as soon as it spans nodes).
struct PlacedRing {
  double members = 1;
  double bandwidth = 1;
  double latency = 0;
  /// `passes` ring passes (2: all-reduce; 1: reduce-scatter or all-gather)
  /// ending with `bytes` per member.
  double seconds(double bytes, double passes) const;
};

/// A rank's gradient synchronisation as lowering emits it: each chunk's last
/// backward in buckets of at most 25 MiB, each all-reduced (reduce-scattered
/// when sharded) over the replicas as its piece ends; the sums inside the
/// mesh after the last bucket; the update; the sharded parameters' all-gather.
struct PlacedSync {
  PlacedRing replicas;        ///< The slowest group of one device per replica.
  double gradientBytes = 0;   ///< The rank's gradients as the backward makes them, whole.
  bool sharded = false;
  double insideMesh = 0;      ///< Seconds of the all-reduces inside the mesh.

  /// All of it in turn, for the closed forms (StepTime.h exposedSync hides
  /// all but the last bucket's share behind the last backward).
  double seconds() const;
  /// As it runs on a submesh viewed as `view`, placed at a node's start
  /// (where placement puts any stage of whole nodes), for `gradients` and
  /// `syncBytes` as a StageEstimate has them: the search's figure, before the
  /// stages have devices. Every rank is taken to have as many rows.
  static PlacedSync onMesh(const std::array<std::int64_t, 2>& view, const ir::Cluster& cluster,
                           double gradients, const std::array<double, 4>& syncBytes, bool zero);
};

struct PlacedCosts {
  /// Per virtual stage k ≥ 1: the activation from k − 1 into k, and its
  /// gradient from k back to k − 1 (nothing where both are on one rank).
  std::vector<PlacedTransfer> activation, gradient;
  std::vector<PlacedSync> sync;  ///< Per pipeline rank.
};

/// The replayed step of `c` (its ranks' costs summed, StageEstimate) with the
/// placed transfers and synchronisation; nothing when the schedule cannot be
/// built.
std::optional<double> replayStep(const Candidate& c, const PlacedCosts& placed);

}  // namespace meshflow::passes
