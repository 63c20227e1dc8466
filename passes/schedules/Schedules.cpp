#include "passes/schedules/Schedules.h"

#include <fmt/format.h>

#include "passes/schedules/GPipe.h"
#include "passes/schedules/Interleaved.h"
#include "passes/schedules/OneFOneB.h"
#include "passes/schedules/ScheduleError.h"
#include "passes/schedules/ZeroBubbleH1.h"
#include "passes/schedules/ZeroBubbleV.h"

namespace meshflow::passes {
namespace {

std::string kindList() {
  std::string names;
  for (ir::ScheduleKind kind : ir::allScheduleKinds()) {
    if (!names.empty()) names += ", ";
    names += ir::scheduleKindName(kind);
  }
  return names;
}

ir::ScheduleKind requireKind(const std::string& name) {
  std::optional<ir::ScheduleKind> kind = ir::parseScheduleKind(name);
  if (!kind) {
    throw ScheduleError(
        fmt::format("unknown pipeline kind '{}' (expected one of {})", name, kindList()));
  }
  return *kind;
}

void requireChunks(ir::ScheduleKind kind, int chunks, int expected) {
  if (chunks == expected) return;
  throw ScheduleError(fmt::format("{} needs exactly {} chunk{} per rank (--virtual {}), got {}",
                                  ir::scheduleKindName(kind), expected, expected == 1 ? "" : "s",
                                  expected, chunks));
}

}  // namespace

ir::PipelineSchedule buildSchedule(const ScheduleRequest& request) {
  const ir::ScheduleKind kind = requireKind(request.kind);
  const int p = request.stages;
  const int m = request.microbatches;
  const bool twoChunkDefault =
      kind == ir::ScheduleKind::kInterleaved || kind == ir::ScheduleKind::kZeroBubbleV;
  const int chunks = request.chunks != 0 ? request.chunks : (twoChunkDefault ? 2 : 1);
  switch (kind) {
    case ir::ScheduleKind::kGPipe:
      requireChunks(kind, chunks, 1);
      return buildGPipe(p, m);
    case ir::ScheduleKind::kOneFOneB:
      requireChunks(kind, chunks, 1);
      return buildOneFOneB(p, m);
    case ir::ScheduleKind::kInterleaved:
      return buildInterleaved(p, m, chunks, request.groupSize);
    case ir::ScheduleKind::kZeroBubbleH1:
      requireChunks(kind, chunks, 1);
      return buildZeroBubbleH1(p, m);
    case ir::ScheduleKind::kZeroBubbleV:
      requireChunks(kind, chunks, 2);
      return buildZeroBubbleV(p, m);
  }
  throw ScheduleError("unhandled schedule kind");
}

}  // namespace meshflow::passes
