#include "passes/planner/StepTime.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace meshflow::passes {

namespace {

// Under 1F1B and ZB-H1 rank r starts a microbatch's forward only after the
// backward (I) of the one p − r microbatches before it: at most p − r are in
// flight between r and the last rank, so the round trip from r through every
// later rank and back — without r's own incoming transfer — takes p − r
// periods at least. ZB-H1's later ranks defer their W out of that loop.
double loopPeriod(ir::ScheduleKind kind, const std::vector<StageEstimate>& stages) {
  const std::size_t p = stages.size();
  double period = 0, loop = 0, deferred = 0;
  for (std::size_t r = p; r-- > 0;) {
    loop += stages[r].latency();
    const double own = loop - 2 * stages[r].transferSeconds -
                       (kind == ir::ScheduleKind::kZeroBubbleH1 ? deferred : 0);
    period = std::max(period, own / double(p - r));
    deferred += stages[r].weightGrad;
  }
  return period;
}

// The steady state's time per microbatch: the slowest rank's compute, the
// busiest comm stream (a rank sends its activation on and the gradient of its
// input back, each priced as the receiver's transfer in), and — except under
// GPipe, which has every microbatch in flight — the time one microbatch's
// round trip through every rank takes per microbatch in flight, Σ t / p (a
// transfer overlaps other work except where that loop waits for it).
// With several chunks per rank the last rank also sends on to the first.
double steadyPeriod(ir::ScheduleKind kind, int chunks, const std::vector<StageEstimate>& stages,
                    double sum) {
  const std::size_t p = stages.size();
  auto out = [&](std::size_t r) {
    return r + 1 < p ? stages[r + 1].transferSeconds : chunks > 1 ? stages[0].transferSeconds : 0;
  };
  // GPipe runs every forward, then every backward: each phase has its own
  // pace, and a comm stream sends only activations in one, gradients in the other.
  if (kind == ir::ScheduleKind::kGPipe) {
    double forward = 0, backward = 0;
    for (std::size_t r = 0; r < p; ++r) {
      const double in = stages[r].transferSeconds;
      forward = std::max({forward, stages[r].forward - in, out(r)});
      backward = std::max({backward, stages[r].backward - in, in});
    }
    return forward + backward;
  }
  double period = sum / double(p);
  for (std::size_t r = 0; r < p; ++r)
    period = std::max({period, stages[r].latency() - 2 * stages[r].transferSeconds,
                       stages[r].transferSeconds + out(r)});
  if (chunks == 1) period = std::max(period, loopPeriod(kind, stages));
  return period;
}

}  // namespace

double pipelineSeconds(ir::ScheduleKind kind, int chunks, int microbatches,
                       const std::vector<StageEstimate>& stages) {
  double sum = 0;
  const StageEstimate* slowest = &stages.front();
  for (const StageEstimate& s : stages) {
    sum += s.latency();
    if (s.latency() > slowest->latency()) slowest = &s;
  }
  const double tMax = steadyPeriod(kind, chunks, stages, sum);
  double m = microbatches;
  switch (kind) {
    case ir::ScheduleKind::kGPipe:
    case ir::ScheduleKind::kOneFOneB:
      return sum + (m - 1) * tMax;
    case ir::ScheduleKind::kInterleaved:
    case ir::ScheduleKind::kZeroBubbleV:
      return m * tMax + (sum - tMax) / std::max(chunks, 1);
    case ir::ScheduleKind::kZeroBubbleH1: {
      // The deferred W fill the compute bubble; the transfers of the fill
      // and drain stay exposed.
      double input = slowest->backward - slowest->weightGrad;
      double share = slowest->latency() > 0
                         ? (slowest->forward + input - slowest->weightGrad) / slowest->latency()
                         : 1;
      share = std::clamp(share, 0.0, 1.0);
      double transfers = 0;
      for (const StageEstimate& s : stages) transfers += 2 * s.transferSeconds;
      const double fill = std::max(sum - tMax, 0.0);
      return m * tMax + (fill - std::min(transfers, fill)) * share + std::min(transfers, fill);
    }
  }
  return sum + (m - 1) * tMax;
}

double stepSeconds(ir::ScheduleKind kind, int chunks, int microbatches,
                   const std::vector<StageEstimate>& stages) {
  double tail = 0;
  for (const StageEstimate& s : stages) tail = std::max(tail, exposedSync(s, chunks) + s.update);
  return pipelineSeconds(kind, chunks, microbatches, stages) + tail;
}

double exposedSync(const StageEstimate& rank, int chunks) {
  // Lowering cuts each chunk's last backward into one piece per bucket of at
  // most 25 MiB (PipelineDescription::bucketBytes, at most 1024 of them) and
  // all-reduces a bucket as soon as its piece ends: all but the last bucket's
  // share of the synchronisation can hide behind the rest of that backward.
  constexpr double kBucketBytes = double(std::int64_t{25} << 20);
  const double perChunk = rank.gradients / double(std::max(chunks, 1));
  const double buckets = std::clamp(std::ceil(perChunk / kBucketBytes), 1.0, 1024.0);
  const double lastBackward = (rank.backward - rank.transferSeconds) / double(std::max(chunks, 1));
  const double hidden =
      (buckets - 1) / buckets * std::min(rank.parameterSync, std::max(lastBackward, 0.0));
  return rank.parameterSync - hidden;
}

double heldMicrobatches(ir::ScheduleKind kind, int chunks, int ranks, int rank, int microbatches) {
  switch (kind) {
    case ir::ScheduleKind::kGPipe:
      return microbatches;
    case ir::ScheduleKind::kInterleaved: {
      int v = std::max(chunks, 1);
      double warmup = 2.0 * (ranks - rank - 1) + double(v - 1) * ranks;
      return std::min(warmup + 1, double(v) * microbatches) / v;
    }
    // A stash lives until its W: ZB-H1 defers rank r's W by r microbatches and
    // ZB-V balances its V, so every rank holds p microbatches' activations
    // (1F1B's peak, on every rank rather than only the first).
    case ir::ScheduleKind::kZeroBubbleH1:
    case ir::ScheduleKind::kZeroBubbleV:
      return std::min(ranks, microbatches);
    default:
      return std::min(ranks - rank, microbatches);
  }
}

Holding holdingOf(ir::ScheduleKind kind, int chunks, int ranks, int rank, int microbatches) {
  Holding h;
  h.held = heldMicrobatches(kind, chunks, ranks, rank, microbatches);
  h.steady = kind != ir::ScheduleKind::kGPipe && double(microbatches) > h.held;
  if (kind == ir::ScheduleKind::kZeroBubbleH1 || kind == ir::ScheduleKind::kZeroBubbleV)
    h.deferred = std::min(rank, microbatches - 1);
  return h;
}

}  // namespace meshflow::passes
