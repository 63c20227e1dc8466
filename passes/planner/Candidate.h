// One complete candidate plan of the planner's search: stages (pipeline ranks
// with their chunks), microbatches and schedule, with its estimated step time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/PipelineSchedule.h"
#include "passes/planner/StageSearch.h"

namespace meshflow::passes {

struct Candidate {
  /// The virtual stages in layer order; with chunks > 1 the schedule places
  /// them (rankOf): interleaved stage k on rank k mod p, ZB-V's as a V.
  std::vector<StageChoice> stages;
  /// Per pipeline rank, its chunks' estimates summed (what the closed forms take).
  std::vector<StageEstimate> ranks;
  int microbatches = 1;
  std::int64_t microbatch = 1;  ///< Samples per microbatch.
  ir::ScheduleKind schedule = ir::ScheduleKind::kOneFOneB;
  int chunks = 1;
  double stepTime = 0;
  std::string search;  ///< "alpa" or "uniform": which stage search found it.

  /// The pipeline rank that runs virtual stage k (ir::PipelineSchedule::locate).
  int rankOf(std::size_t k) const;

  /// e.g. "1f1b, 16 microbatches, 4 stages on (1, 8) as 2x4"
  std::string describe(const std::vector<MeshConfig>& configs) const;
};

}  // namespace meshflow::passes
