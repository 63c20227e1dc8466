// Pictures of a timed pipeline schedule: terminal text, Chrome trace, SVG.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ir/PipelineSchedule.h"
#include "passes/schedules/ScheduleTiming.h"

namespace meshflow::passes {

/// One row per rank, one cell per unit step (the largest time that divides every
/// start and end). An action's first cell carries its text (`F3`, `B3.1`), its
/// later cells `-`, idle cells `.`. A last line names the unit. Timelines wider
/// than a terminal could ever show are replaced by a one-line note.
std::string textTimeline(const ir::PipelineSchedule& schedule, const ScheduleTiming& timing);

/// A Chrome trace / Perfetto JSON object: one complete ("X") event per action with
/// name, cat, ph, ts, dur (microseconds; one schedule time unit is 1000 µs), pid 0
/// and tid = rank, plus process_name and thread_name metadata events.
nlohmann::json chromeTrace(const ir::PipelineSchedule& schedule, const ScheduleTiming& timing);

/// A standalone SVG picture: one row per rank, a coloured box per action labelled
/// with its microbatch (and chunk), a time axis and a legend.
std::string timelineSvg(const ir::PipelineSchedule& schedule, const ScheduleTiming& timing);

}  // namespace meshflow::passes
