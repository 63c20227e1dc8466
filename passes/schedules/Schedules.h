// The pipeline-schedule generators behind one entry point.
#pragma once

#include <string>

#include "ir/PipelineSchedule.h"

namespace meshflow::passes {

struct ScheduleRequest {
  std::string kind;      // gpipe, 1f1b, interleaved, zb-h1 or zbv
  int stages = 1;        // p
  int microbatches = 1;  // m
  int chunks = 0;        // v; 0 means the kind's default: 2 for interleaved and zbv, else 1
  int groupSize = 0;     // interleaved only: microbatches per group; 0 means p
};

/// Builds the schedule the request names. Throws ScheduleError naming the broken
/// rule: unknown kind, p < 1, m < 1, more than one chunk for gpipe/1f1b/zb-h1,
/// interleaved with v < 2 or m not a multiple of the group size, zbv without
/// exactly 2 chunks.
ir::PipelineSchedule buildSchedule(const ScheduleRequest& request);

}  // namespace meshflow::passes
