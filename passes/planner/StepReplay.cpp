#include "passes/planner/StepReplay.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "passes/PipelineDescription.h"
#include "passes/schedules/ScheduleError.h"
#include "passes/schedules/Schedules.h"

namespace meshflow::passes {

double PlacedRing::seconds(double bytes, double passes) const {
  if (members < 2 || bytes <= 0) return 0;
  return passes * (members - 1) / members * bytes * secondsPerByte(bandwidth) +
         passes * (members - 1) * latency;
}

double PlacedSync::seconds() const {
  if (replicas.members < 2 || gradientBytes <= 0) return insideMesh;
  const double bucket = double(PipelineDescription{}.bucketBytes);
  const double buckets =
      std::clamp(std::ceil(gradientBytes / bucket), 1.0, double(PipelineDescription::kMaxBuckets));
  return replicas.seconds(gradientBytes, 2) +
         2 * (buckets - 1) * (replicas.members - 1) * replicas.latency + insideMesh;
}

PlacedSync PlacedSync::onMesh(const std::array<std::int64_t, 2>& view, const ir::Cluster& cluster,
                              double gradients, const std::array<double, 4>& syncBytes, bool zero) {
  // A group of devices node-major from 0: it spans nodes once its last
  // device is past the first node.
  auto ring = [&](double members, double last) {
    PlacedRing r;
    r.members = members;
    const bool spans = last >= double(std::max<std::int64_t>(1, cluster.devicesPerNode));
    r.bandwidth = spans ? cluster.interNode.bandwidth /
                              double(std::max<std::int64_t>(1, cluster.devicesPerNode))
                        : cluster.intraNode.bandwidth;
    r.latency = spans ? cluster.interNode.latency : cluster.intraNode.latency;
    return r;
  };
  const double rows = double(view[0]), columns = double(view[1]);
  PlacedSync sync;
  sync.gradientBytes = gradients;
  if (rows > 1) {
    sync.replicas = ring(rows, rows * columns - 1);  // the group of the last column
    sync.sharded = zero;
    if (zero) sync.gradientBytes *= rows;
  }
  sync.insideMesh = ring(columns, columns - 1).seconds(syncBytes[2] + syncBytes[3], 2);
  return sync;
}

namespace {

constexpr double kUnknown = -1;

// The replay: each rank runs its actions in order while their inputs are
// known; a rank whose next action waits for another rank's output stops until
// a later sweep finds it.
class Replay {
 public:
  Replay(const Candidate& c, const PlacedCosts& placed, ir::PipelineSchedule schedule)
      : c_(c), placed_(placed), schedule_(std::move(schedule)) {
    const std::size_t slots = std::size_t(schedule_.virtualStages()) * std::size_t(c.microbatches);
    forwardDone_.assign(slots, kUnknown);
    backwardDone_.assign(slots, kUnknown);
    activationAt_.assign(slots, kUnknown);
    gradientAt_.assign(slots, kUnknown);
    ranks_.resize(std::size_t(schedule_.stages));
    for (int r = 0; r < schedule_.stages; ++r) {
      const auto& actions = schedule_.ranks[std::size_t(r)];
      std::vector<std::size_t>& last = ranks_[std::size_t(r)].lastBackward;
      last.assign(std::size_t(schedule_.chunks), actions.size());
      for (std::size_t i = 0; i < actions.size(); ++i)
        if (actions[i].kind == ir::ActionKind::kBackward ||
            actions[i].kind == ir::ActionKind::kWeightGrad)
          last[std::size_t(actions[i].chunk)] = i;
    }
  }

  std::optional<double> run() {
    const int p = schedule_.stages;
    for (bool progress = true; progress;) {
      progress = false;
      for (int r = 0; r < p; ++r) progress = advance(r) || progress;
      for (int r = p - 1; r >= 0; --r) progress = advance(r) || progress;
    }
    double step = 0;
    for (int r = 0; r < p; ++r) {
      RankState& s = ranks_[std::size_t(r)];
      if (s.cursor < schedule_.ranks[std::size_t(r)].size()) return std::nullopt;
      update(r);
      step = std::max({step, s.compute, s.comm, s.grad});
    }
    return step;
  }

 private:
  struct RankState {
    std::size_t cursor = 0;
    double compute = 0, comm = 0, grad = 0;  // when each stream is next free
    double lastBucket = 0;                   // when the latest gradient bucket is final
    bool buckets = false;
    std::vector<std::size_t> lastBackward;   // per chunk: its last B or W
  };

  std::size_t slot(int vs, int mb) const {
    return std::size_t(vs) * std::size_t(c_.microbatches) + std::size_t(mb);
  }
  int rankOf(int vs) const { return schedule_.locate(vs).rank; }
  double chunks() const { return double(schedule_.chunks); }
  const StageEstimate& costs(int r) const { return c_.ranks[std::size_t(r)]; }
  double forward(int r) const { return (costs(r).forward - costs(r).transferSeconds) / chunks(); }
  double backward(int r) const { return (costs(r).backward - costs(r).transferSeconds) / chunks(); }

  // When the input of a step arrives on rank r: handed over on the rank, or
  // received (and its tiles gathered on the comm stream). kUnknown: not yet.
  double input(int r, int from, int to, const std::vector<double>& handedOver,
               const std::vector<double>& arrivals, const PlacedTransfer& transfer, int mb) {
    if (rankOf(from) == r) return handedOver[slot(from, mb)];
    const double at = arrivals[slot(to, mb)];
    if (at == kUnknown || transfer.gather <= 0) return at;
    RankState& s = ranks_[std::size_t(r)];
    s.comm = std::max(s.comm, at) + transfer.gather;
    return s.comm;
  }

  void send(int r, int from, int to, double ready, const PlacedTransfer& transfer,
            std::vector<double>& arrivals, int mb) {
    if (rankOf(to) == r) return;
    RankState& s = ranks_[std::size_t(r)];
    s.comm = std::max(s.comm, ready) + transfer.send;
    arrivals[slot(to, mb)] = s.comm;
  }

  // A chunk's last backward (B or W) runs in one piece per bucket; each
  // bucket is all-reduced over the replicas on the grad stream as it ends.
  void runInPieces(int r, double seconds) {
    RankState& s = ranks_[std::size_t(r)];
    const PlacedSync& sync = placed_.sync[std::size_t(r)];
    const double chunkGradient = sync.gradientBytes / chunks();
    const bool replicas = sync.replicas.members > 1;
    double parts = 1;
    if (chunkGradient > 0 && replicas) {
      const double bucket = double(PipelineDescription{}.bucketBytes);
      parts = std::min(std::ceil(chunkGradient / bucket), double(PipelineDescription::kMaxBuckets));
    }
    for (int part = 0; part < int(parts); ++part) {
      s.compute += seconds / parts;
      if (chunkGradient <= 0) continue;
      s.buckets = true;
      s.lastBucket = s.compute;
      if (!replicas) continue;
      s.grad = std::max(s.grad, s.compute) +
               sync.replicas.seconds(chunkGradient / parts, sync.sharded ? 1 : 2);
      s.lastBucket = s.grad;
    }
  }

  // Runs rank r's actions while their inputs are known; whether any ran.
  bool advance(int r) {
    RankState& s = ranks_[std::size_t(r)];
    const auto& actions = schedule_.ranks[std::size_t(r)];
    const std::size_t start = s.cursor;
    for (; s.cursor < actions.size(); ++s.cursor) {
      const ir::Action& a = actions[s.cursor];
      const bool lastOfChunk = s.lastBackward[std::size_t(a.chunk)] == s.cursor;
      if (a.kind == ir::ActionKind::kForward) {
        if (!runForward(r, a)) break;
      } else if (a.kind == ir::ActionKind::kWeightGrad) {
        runCompute(r, costs(r).weightGrad / chunks(), lastOfChunk);
      } else if (!runBackward(r, a, lastOfChunk)) {
        break;
      }
    }
    return s.cursor != start;
  }

  void runCompute(int r, double seconds, bool lastOfChunk) {
    if (lastOfChunk) runInPieces(r, seconds);
    else ranks_[std::size_t(r)].compute += seconds;
  }

  // A forward once its activation is in; false while it is not.
  bool runForward(int r, const ir::Action& a) {
    RankState& s = ranks_[std::size_t(r)];
    const int vs = schedule_.virtualStage(r, a.chunk), mb = a.microbatch;
    double ready = 0;
    if (vs > 0) {
      ready = input(r, vs - 1, vs, forwardDone_, activationAt_,
                    placed_.activation[std::size_t(vs)], mb);
      if (ready == kUnknown) return false;
    }
    s.compute = std::max(s.compute, ready) + forward(r);
    forwardDone_[slot(vs, mb)] = s.compute;
    if (vs + 1 < schedule_.virtualStages())
      send(r, vs, vs + 1, s.compute, placed_.activation[std::size_t(vs + 1)], activationAt_, mb);
    return true;
  }

  // A backward (B or I) once its output's gradient is in; false while it is not.
  bool runBackward(int r, const ir::Action& a, bool lastOfChunk) {
    RankState& s = ranks_[std::size_t(r)];
    const int vs = schedule_.virtualStage(r, a.chunk), mb = a.microbatch;
    double ready = 0;
    if (vs + 1 < schedule_.virtualStages()) {
      ready = input(r, vs + 1, vs, backwardDone_, gradientAt_,
                    placed_.gradient[std::size_t(vs + 1)], mb);
      if (ready == kUnknown) return false;
    }
    // The layer RUN R reruns runs first, on the stash alone: it need not wait
    // for the gradient (lowering's RUN R before the backward); the other
    // layers' reruns are in the backward.
    const double recompute = costs(r).rerunAhead / chunks();
    s.compute = std::max(s.compute + recompute, ready);
    const bool whole = a.kind == ir::ActionKind::kBackward;
    const double seconds =
        (whole ? backward(r) : backward(r) - costs(r).weightGrad / chunks()) - recompute;
    runCompute(r, seconds, whole && lastOfChunk);
    backwardDone_[slot(vs, mb)] = s.compute;
    if (vs > 0) send(r, vs, vs - 1, s.compute, placed_.gradient[std::size_t(vs)], gradientAt_, mb);
    return true;
  }

  // After the rank's last backward: the sums inside the mesh, the update and,
  // with sharded optimizer state, the parameters' all-gather.
  void update(int r) {
    RankState& s = ranks_[std::size_t(r)];
    const PlacedSync& sync = placed_.sync[std::size_t(r)];
    double ready = 0;
    if (s.buckets) {
      s.grad = std::max(s.grad, s.lastBucket) + sync.insideMesh;
      ready = std::max(s.grad, s.lastBucket);
    }
    s.compute = std::max(s.compute, ready) + costs(r).update;
    if (sync.sharded && sync.replicas.members > 1)
      s.grad = std::max(s.grad, s.compute) + sync.replicas.seconds(sync.gradientBytes, 1);
  }

  const Candidate& c_;
  const PlacedCosts& placed_;
  ir::PipelineSchedule schedule_;
  std::vector<RankState> ranks_;
  // Per (virtual stage, microbatch): when its forward and backward (B or I)
  // ended, and when the activation and gradient flowing into it arrived.
  std::vector<double> forwardDone_, backwardDone_, activationAt_, gradientAt_;
};

}  // namespace

std::optional<double> replayStep(const Candidate& c, const PlacedCosts& placed) {
  ir::PipelineSchedule schedule;
  try {
    schedule = buildSchedule({std::string(ir::scheduleKindName(c.schedule)),
                              static_cast<int>(c.ranks.size()), c.microbatches, c.chunks, 0});
  } catch (const ScheduleError&) {
    return std::nullopt;
  }
  return Replay(c, placed, std::move(schedule)).run();
}

}  // namespace meshflow::passes
