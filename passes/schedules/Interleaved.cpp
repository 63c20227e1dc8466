#include "passes/schedules/Interleaved.h"

#include <fmt/format.h>

#include <algorithm>

#include "passes/schedules/ScheduleError.h"

namespace meshflow::passes {
namespace {

void checkRequest(int stages, int microbatches, int chunks, int groupSize) {
  requirePipelineShape("interleaved", stages, microbatches);
  if (chunks < 2) {
    throw ScheduleError(fmt::format(
        "interleaved needs at least 2 chunks per rank (--virtual >= 2), got {}", chunks));
  }
  // A group smaller than p starves the pipeline: the first rank would need the
  // next chunk's input before the last rank has produced it.
  if (groupSize < stages) {
    throw ScheduleError(
        fmt::format("interleaved needs a microbatch group size of at least the stages ({}), got {}",
                    stages, groupSize));
  }
  if (microbatches % groupSize != 0) {
    throw ScheduleError(
        fmt::format("interleaved needs microbatches to be a multiple of the group size {}, got {}",
                    groupSize, microbatches));
  }
}

// The k-th forward of every rank, k = 0..v·m−1 (Megatron's "virtual microbatch"):
// within each group of g microbatches, chunk 0 for the whole group, then chunk 1 …
ir::Action forwardAt(int k, int chunks, int groupSize) {
  const int perGroup = groupSize * chunks;
  const int group = k / perGroup;
  const int inGroup = k % perGroup;
  return {ir::ActionKind::kForward, group * groupSize + inGroup % groupSize, inGroup / groupSize};
}

// The k-th backward visits microbatches in the same order, chunks last to first.
ir::Action backwardAt(int k, int chunks, int groupSize) {
  ir::Action action = forwardAt(k, chunks, groupSize);
  return {ir::ActionKind::kBackward, action.microbatch, chunks - 1 - action.chunk};
}

std::vector<ir::Action> rankOrder(int stages, int microbatches, int chunks, int groupSize,
                                  int rank) {
  const int total = microbatches * chunks;
  const int warmup = std::min(2 * (stages - rank - 1) + (chunks - 1) * groupSize, total);
  std::vector<ir::Action> order;
  for (int k = 0; k < warmup; ++k) order.push_back(forwardAt(k, chunks, groupSize));
  for (int k = 0; k < total - warmup; ++k) {
    order.push_back(forwardAt(k + warmup, chunks, groupSize));
    order.push_back(backwardAt(k, chunks, groupSize));
  }
  for (int k = total - warmup; k < total; ++k) order.push_back(backwardAt(k, chunks, groupSize));
  return order;
}

}  // namespace

ir::PipelineSchedule buildInterleaved(int stages, int microbatches, int chunks, int groupSize) {
  if (groupSize == 0) groupSize = stages;
  checkRequest(stages, microbatches, chunks, groupSize);
  ir::PipelineSchedule schedule{ir::ScheduleKind::kInterleaved, stages, microbatches, chunks, {}};
  for (int r = 0; r < stages; ++r) {
    schedule.ranks.push_back(rankOrder(stages, microbatches, chunks, groupSize, r));
  }
  return schedule;
}

}  // namespace meshflow::passes
