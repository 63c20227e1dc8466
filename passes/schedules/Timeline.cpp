#include "passes/schedules/Timeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace meshflow::passes {
namespace {

using ir::ActionKind;

// Wider than this a text timeline helps nobody; the trace and SVG still work.
constexpr int64_t kMaxTextCells = 4000;
// Chrome traces count microseconds; one schedule time unit reads as a millisecond.
constexpr double kTraceMicrosPerUnit = 1000.0;

std::string labelOf(const ir::PipelineSchedule& schedule, const TimedAction& timed) {
  return ir::actionText(timed.action, schedule.chunks);
}

// The largest time that divides every start and end, so each action spans whole cells.
Rational unitStep(const ScheduleTiming& timing) {
  Rational unit = 0;
  for (const std::vector<TimedAction>& actions : timing.ranks) {
    for (const TimedAction& timed : actions) unit = gcd(gcd(unit, timed.start), timed.end);
  }
  return unit == 0 ? Rational(1) : unit;
}

size_t labelWidth(const ir::PipelineSchedule& schedule, const ScheduleTiming& timing) {
  size_t width = 1;
  for (const std::vector<TimedAction>& actions : timing.ranks) {
    for (const TimedAction& timed : actions)
      width = std::max(width, labelOf(schedule, timed).size());
  }
  return width;
}

std::string textRow(const ir::PipelineSchedule& schedule, const std::vector<TimedAction>& actions,
                    int64_t cells, Rational unit, size_t width) {
  std::vector<std::string> row(static_cast<size_t>(cells), ".");
  for (const TimedAction& timed : actions) {
    const int64_t first = (timed.start / unit).num();
    const int64_t span = ((timed.end - timed.start) / unit).num();
    for (int64_t k = 0; k < span; ++k) {
      row[static_cast<size_t>(first + k)] =
          k == 0 ? labelOf(schedule, timed) : std::string(width, '-');
    }
  }
  std::string line;
  for (const std::string& cell : row) line += fmt::format("{:<{}} ", cell, width);
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

std::string_view categoryOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "forward";
    case ActionKind::kBackward:
      return "backward";
    case ActionKind::kInputGrad:
      return "input-grad";
    case ActionKind::kWeightGrad:
      return "weight-grad";
    case ActionKind::kRecompute:
      return "recompute";
  }
  return "?";
}

nlohmann::json metadataEvent(std::string_view name, int tid, nlohmann::json args) {
  return {{"name", name}, {"ph", "M"}, {"pid", 0}, {"tid", tid}, {"args", std::move(args)}};
}

nlohmann::json traceEvent(const ir::PipelineSchedule& schedule, int rank,
                          const TimedAction& timed) {
  return {{"name", labelOf(schedule, timed)},
          {"cat", categoryOf(timed.action.kind)},
          {"ph", "X"},
          {"ts", timed.start.toDouble() * kTraceMicrosPerUnit},
          {"dur", (timed.end - timed.start).toDouble() * kTraceMicrosPerUnit},
          {"pid", 0},
          {"tid", rank},
          {"args",
           {{"microbatch", timed.action.microbatch},
            {"chunk", timed.action.chunk},
            {"stage", timed.stage}}}};
}

std::string scheduleTitle(const ir::PipelineSchedule& schedule) {
  return fmt::format("{} p={} m={} v={}", ir::scheduleKindName(schedule.kind), schedule.stages,
                     schedule.microbatches, schedule.chunks);
}

// --- SVG ---------------------------------------------------------------------

struct SvgLayout {
  double left = 64;
  double top = 44;
  double rowHeight = 30;
  double boxHeight = 24;
  double plotWidth = 0;
  double scale = 0;  // pixels per time unit
  int rows = 0;

  double x(Rational t) const { return left + t.toDouble() * scale; }
  double rowY(int rank) const { return top + rank * rowHeight; }
  double axisY() const { return top + rows * rowHeight + 6; }
  double width() const { return left + plotWidth + 24; }
  double height() const { return axisY() + 64; }
};

SvgLayout layoutFor(const ScheduleTiming& timing, int rows) {
  SvgLayout layout;
  layout.rows = rows;
  const double makespan = std::max(timing.makespan.toDouble(), 1e-9);
  const double cells = makespan / unitStep(timing).toDouble();
  // About 28 px per unit step reads well; clamp so small and huge runs still fit a page.
  layout.plotWidth = std::clamp(cells * 28.0, 480.0, 2400.0);
  layout.scale = layout.plotWidth / makespan;
  return layout;
}

std::string_view colourOf(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return "#4e79a7";
    case ActionKind::kBackward:
      return "#59a14f";
    case ActionKind::kInputGrad:
      return "#8cd17d";
    case ActionKind::kWeightGrad:
      return "#f28e2b";
    case ActionKind::kRecompute:
      return "#b07aa1";
  }
  return "#bab0ac";
}

void svgBox(std::string& svg, const ir::PipelineSchedule& schedule, const SvgLayout& layout,
            int rank, const TimedAction& timed) {
  const double x = layout.x(timed.start);
  const double w = layout.x(timed.end) - x;
  const double y = layout.rowY(rank) + (layout.rowHeight - layout.boxHeight) / 2;
  // Later chunks are drawn lighter so a rank's two model chunks stay apart.
  const double opacity = timed.action.chunk == 0 ? 1.0 : 0.6;
  const std::string label = labelOf(schedule, timed);
  svg += fmt::format(
      "  <g><title>{} rank {} stage {} [{}, {})</title><rect x=\"{:.2f}\" y=\"{:.2f}\" "
      "width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\" fill-opacity=\"{}\" stroke=\"#222\" "
      "stroke-width=\"0.5\"/>",
      label, rank, timed.stage, timed.start.toString(), timed.end.toString(), x, y, w,
      layout.boxHeight, colourOf(timed.action.kind), opacity);
  // Text only where it fits; the <title> tooltip names every box anyway.
  if (w >= 7.0 * static_cast<double>(label.size() - 1)) {
    svg += fmt::format(
        "<text x=\"{:.2f}\" y=\"{:.2f}\" text-anchor=\"middle\" font-size=\"11\" "
        "fill=\"#fff\">{}</text>",
        x + w / 2, y + layout.boxHeight / 2 + 4, label.substr(1));
  }
  svg += "</g>\n";
}

// A tick every 1, 2 or 5 × 10^k time units, at most about 20 of them.
double tickStep(double makespan) {
  double step = 1e-6;
  while (makespan / step > 20) {
    for (double factor : {2.0, 2.5, 2.0}) {
      step *= factor;
      if (makespan / step <= 20) break;
    }
  }
  return step;
}

void svgAxis(std::string& svg, const ScheduleTiming& timing, const SvgLayout& layout) {
  const double y = layout.axisY();
  svg += fmt::format(
      "  <line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" "
      "stroke=\"#222\"/>\n",
      layout.left, y, layout.left + layout.plotWidth, y);
  const double makespan = timing.makespan.toDouble();
  const double step = tickStep(std::max(makespan, 1e-9));
  for (int k = 0; k * step <= makespan * (1 + 1e-12); ++k) {
    const double x = layout.left + k * step * layout.scale;
    svg += fmt::format(
        "  <line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" "
        "stroke=\"#222\"/><text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"10\" "
        "text-anchor=\"middle\">{:g}</text>\n",
        x, y, x, y + 4, x, y + 15, k * step);
  }
  svg += fmt::format("  <text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"11\">time</text>\n",
                     layout.left + layout.plotWidth - 24, y + 30);
}

void svgLegend(std::string& svg, const ir::PipelineSchedule& schedule, const SvgLayout& layout) {
  std::vector<ActionKind> kinds = {ActionKind::kForward, ActionKind::kBackward};
  if (schedule.splitsBackward()) {
    kinds = {ActionKind::kForward, ActionKind::kInputGrad, ActionKind::kWeightGrad};
  }
  double x = layout.left;
  const double y = layout.axisY() + 24;
  for (ActionKind kind : kinds) {
    svg += fmt::format(
        "  <rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"12\" height=\"12\" fill=\"{}\"/>"
        "<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"11\">{} {}</text>\n",
        x, y, colourOf(kind), x + 16, y + 10, ir::actionKindLetter(kind), categoryOf(kind));
    x += 110;
  }
}

}  // namespace

std::string textTimeline(const ir::PipelineSchedule& schedule, const ScheduleTiming& timing) {
  const Rational unit = unitStep(timing);
  const int64_t cells = (timing.makespan / unit).num();
  if (cells > kMaxTextCells) {
    return fmt::format("(text timeline omitted: {} cells of {} time units; use --svg or --trace)\n",
                       cells, unit.toString());
  }
  const size_t width = labelWidth(schedule, timing);
  const size_t nameWidth = fmt::format("rank {}", timing.ranks.size() - 1).size();
  std::string text;
  for (size_t r = 0; r < timing.ranks.size(); ++r) {
    text += fmt::format("{:<{}} | {}\n", fmt::format("rank {}", r), nameWidth,
                        textRow(schedule, timing.ranks[r], cells, unit, width));
  }
  text += fmt::format("one cell = {} time unit{}\n", unit.toString(), unit == 1 ? "" : "s");
  return text;
}

nlohmann::json chromeTrace(const ir::PipelineSchedule& schedule, const ScheduleTiming& timing) {
  nlohmann::json events = nlohmann::json::array();
  events.push_back(
      metadataEvent("process_name", 0, {{"name", "pipeline " + scheduleTitle(schedule)}}));
  for (size_t r = 0; r < timing.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    events.push_back(metadataEvent("thread_name", rank, {{"name", fmt::format("rank {}", r)}}));
    events.push_back(metadataEvent("thread_sort_index", rank, {{"sort_index", rank}}));
  }
  for (size_t r = 0; r < timing.ranks.size(); ++r) {
    for (const TimedAction& timed : timing.ranks[r]) {
      events.push_back(traceEvent(schedule, static_cast<int>(r), timed));
    }
  }
  return {{"displayTimeUnit", "ms"}, {"traceEvents", std::move(events)}};
}

std::string timelineSvg(const ir::PipelineSchedule& schedule, const ScheduleTiming& timing) {
  const SvgLayout layout = layoutFor(timing, static_cast<int>(timing.ranks.size()));
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" font-family=\"sans-serif\">\n"
      "  <rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n"
      "  <text x=\"{:.2f}\" y=\"24\" font-size=\"14\">{} — makespan {}, bubble {:.1f}%</text>\n",
      layout.width(), layout.height(), layout.width(), layout.height(), layout.left,
      scheduleTitle(schedule), timing.makespan.toString(),
      100 * timing.overallBubbleFraction.toDouble());
  for (size_t r = 0; r < timing.ranks.size(); ++r) {
    const int rank = static_cast<int>(r);
    svg += fmt::format("  <text x=\"8\" y=\"{:.2f}\" font-size=\"12\">rank {}</text>\n",
                       layout.rowY(rank) + layout.rowHeight / 2 + 4, r);
    for (const TimedAction& timed : timing.ranks[r]) {
      if (timed.end > timed.start) svgBox(svg, schedule, layout, rank, timed);
    }
  }
  svgAxis(svg, timing, layout);
  svgLegend(svg, schedule, layout);
  svg += "</svg>\n";
  return svg;
}

}  // namespace meshflow::passes
