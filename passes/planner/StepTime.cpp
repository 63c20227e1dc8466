#include "passes/planner/StepTime.h"

#include <algorithm>

namespace meshflow::passes {

double pipelineSeconds(ir::ScheduleKind kind, int chunks, int microbatches,
                       const std::vector<StageEstimate>& stages) {
  double sum = 0;
  const StageEstimate* slowest = &stages.front();
  for (const StageEstimate& s : stages) {
    sum += s.latency();
    if (s.latency() > slowest->latency()) slowest = &s;
  }
  double tMax = slowest->latency();
  double m = microbatches;
  switch (kind) {
    case ir::ScheduleKind::kGPipe:
    case ir::ScheduleKind::kOneFOneB:
      return sum + (m - 1) * tMax;
    case ir::ScheduleKind::kInterleaved:
    case ir::ScheduleKind::kZeroBubbleV:
      return m * tMax + (sum - tMax) / std::max(chunks, 1);
    case ir::ScheduleKind::kZeroBubbleH1: {
      double input = slowest->backward - slowest->weightGrad;
      double share = tMax > 0 ? (slowest->forward + input - slowest->weightGrad) / tMax : 1;
      return m * tMax + (sum - tMax) * std::clamp(share, 0.0, 1.0);
    }
  }
  return sum + (m - 1) * tMax;
}

double stepSeconds(ir::ScheduleKind kind, int chunks, int microbatches,
                   const std::vector<StageEstimate>& stages) {
  double tail = 0;
  for (const StageEstimate& s : stages) tail = std::max(tail, s.parameterSync + s.update);
  return pipelineSeconds(kind, chunks, microbatches, stages) + tail;
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
