#include "passes/schedules/ScheduleCli.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string_view>
#include <vector>

#include "passes/schedules/ScheduleError.h"
#include "passes/schedules/ScheduleTiming.h"
#include "passes/schedules/Schedules.h"
#include "passes/schedules/Timeline.h"

namespace meshflow::passes {
namespace {

// A malformed command line (exit 2), as opposed to a bad value (ScheduleError, exit 1).
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CliOptions {
  ScheduleRequest request;
  TimingOptions timing;
  std::string timesText;
  std::string traceFile;
  std::string svgFile;
  bool json = false;
  bool help = false;
};

constexpr std::string_view kValuedOptions[] = {
    "--pipeline", "--stages",      "--microbatches", "--virtual", "--group",
    "--times",    "--p2p-latency", "--trace",        "--svg",
};

bool takesValue(std::string_view name) {
  for (std::string_view option : kValuedOptions) {
    if (option == name) return true;
  }
  return false;
}

int parseInt(std::string_view option, const std::string& text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
    throw ScheduleError(fmt::format("{} expects an integer, got '{}'", option, text));
  }
  return value;
}

Rational parseTime(std::string_view what, std::string_view text) {
  std::optional<Rational> value = parseRational(text);
  if (!value) {
    throw ScheduleError(
        fmt::format("{} expects a number like 2, 1.5 or 3/2, got '{}'", what, text));
  }
  return *value;
}

void applyOption(CliOptions& options, std::string_view name, const std::string& value) {
  if (name == "--pipeline") options.request.kind = value;
  if (name == "--stages") options.request.stages = parseInt(name, value);
  if (name == "--microbatches") options.request.microbatches = parseInt(name, value);
  if (name == "--virtual") options.request.chunks = parseInt(name, value);
  if (name == "--group") options.request.groupSize = parseInt(name, value);
  if (name == "--times") options.timesText = value;
  if (name == "--p2p-latency") options.timing.p2pLatency = parseTime(name, value);
  if (name == "--trace") options.traceFile = value;
  if (name == "--svg") options.svgFile = value;
}

CliOptions parseArgs(std::span<const std::string> args) {
  CliOptions options;
  std::map<std::string, bool, std::less<>> seen;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      continue;
    }
    if (arg == "--json") {
      options.json = true;
      continue;
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(0, equals);
    if (!takesValue(name)) {
      throw UsageError(arg.starts_with("-") ? fmt::format("unknown option '{}'", name)
                                            : fmt::format("unexpected argument '{}'", arg));
    }
    if (equals == std::string::npos && i + 1 >= args.size()) {
      throw UsageError(fmt::format("{} needs a value", name));
    }
    applyOption(options, name, equals != std::string::npos ? arg.substr(equals + 1) : args[++i]);
    seen[name] = true;
  }
  for (std::string_view required : {"--pipeline", "--stages", "--microbatches"}) {
    if (!options.help && !seen.contains(required)) {
      throw UsageError(fmt::format("missing {}", required));
    }
  }
  return options;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

Rational StageTimes::*timeField(std::string_view key) {
  if (key == "F" || key == "f") return &StageTimes::forward;
  if (key == "B" || key == "b") return &StageTimes::backward;
  if (key == "W" || key == "w") return &StageTimes::weight;
  throw ScheduleError(fmt::format("--times names F, B and W, got '{}'", key));
}

// `F=1,B=2,W=1`; a value may be a colon-separated list with one time per rank.
void applyTimes(CliOptions& options) {
  if (options.timesText.empty()) return;
  const int ranks = options.request.stages;
  std::vector<StageTimes> perRank(static_cast<size_t>(std::max(ranks, 1)), options.timing.times);
  bool anyList = false;
  for (std::string_view entry : split(options.timesText, ',')) {
    const size_t equals = entry.find('=');
    if (equals == std::string_view::npos) {
      throw ScheduleError(fmt::format("--times expects KIND=TIME entries, got '{}'", entry));
    }
    Rational StageTimes::*field = timeField(entry.substr(0, equals));
    std::vector<std::string_view> values = split(entry.substr(equals + 1), ':');
    if (values.size() > 1 && values.size() != perRank.size()) {
      throw ScheduleError(fmt::format("--times lists {} times for {} but there are {} ranks",
                                      values.size(), entry.substr(0, equals), ranks));
    }
    anyList = anyList || values.size() > 1;
    for (size_t r = 0; r < perRank.size(); ++r) {
      perRank[r].*field = parseTime("--times", values[values.size() > 1 ? r : 0]);
    }
  }
  options.timing.times = perRank[0];
  if (anyList) options.timing.perRank = std::move(perRank);
}

nlohmann::ordered_json jsonNumber(Rational value) {
  if (value.isInteger()) return value.num();
  return value.toDouble();
}

nlohmann::ordered_json jsonReport(const ir::PipelineSchedule& schedule,
                                  const ScheduleTiming& timing) {
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const std::vector<ir::Action>& actions : schedule.ranks) {
    nlohmann::ordered_json row = nlohmann::ordered_json::array();
    for (const ir::Action& action : actions) row.push_back(ir::actionText(action, schedule.chunks));
    ranks.push_back(std::move(row));
  }
  nlohmann::ordered_json report;
  report["ranks"] = std::move(ranks);
  report["makespan"] = jsonNumber(timing.makespan);
  report["bubble_fraction"] = jsonNumber(timing.overallBubbleFraction);
  report["peak_inflight"] = timing.peakInflight;
  return report;
}

void writeFile(const std::string& path, const std::string& contents) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << contents;
  file.close();
  if (!file) throw ScheduleError(fmt::format("cannot write '{}'", path));
}

std::string joinRationals(const std::vector<Rational>& values) {
  std::string text;
  for (const Rational& value : values) text += (text.empty() ? "" : " ") + value.toString();
  return text;
}

void printText(std::ostream& out, const ir::PipelineSchedule& schedule,
               const ScheduleTiming& timing) {
  out << textTimeline(schedule, timing);
  out << fmt::format("makespan: {}\n", timing.makespan.toString());
  out << fmt::format("bubble fraction: {} ({:.2f}%)\n", timing.overallBubbleFraction.toString(),
                     100 * timing.overallBubbleFraction.toDouble());
  out << fmt::format("bubble per rank: {}\n", joinRationals(timing.bubbleFraction));
  out << fmt::format("peak in flight: {}\n", fmt::join(timing.peakInflight, " "));
}

int run(CliOptions& options, std::ostream& out) {
  // The schedule's rules are checked first: they explain more than a times error.
  const ir::PipelineSchedule schedule = buildSchedule(options.request);
  applyTimes(options);
  const ScheduleTiming timing = timeSchedule(schedule, options.timing);
  if (options.json) {
    out << jsonReport(schedule, timing).dump() << "\n";
  } else {
    printText(out, schedule, timing);
  }
  if (!options.traceFile.empty()) {
    writeFile(options.traceFile, chromeTrace(schedule, timing).dump(1) + "\n");
  }
  if (!options.svgFile.empty()) writeFile(options.svgFile, timelineSvg(schedule, timing));
  return 0;
}

}  // namespace

std::string scheduleCliHelp() {
  return "usage: meshflow schedule --pipeline KIND --stages P --microbatches M [--virtual V]\n"
         "           [--group G] [--times F=1,B=2,W=1] [--p2p-latency T] [--json]\n"
         "           [--trace FILE] [--svg FILE]\n"
         "\n"
         "Builds a pipeline schedule, runs it on a virtual clock and shows its timeline.\n"
         "\n"
         "  --pipeline KIND    gpipe, 1f1b, interleaved, zb-h1 or zbv\n"
         "  --stages P         pipeline ranks (>= 1)\n"
         "  --microbatches M   microbatches per step (>= 1)\n"
         "  --virtual V        model chunks per rank (interleaved: >= 2, default 2; zbv: 2)\n"
         "  --group G          interleaved microbatch group size (default P; M % G == 0)\n"
         "  --times F=..,B=..,W=..\n"
         "                     times of one microbatch on one rank (default F=1,B=2,W=1);\n"
         "                     B is the whole backward (zero-bubble kinds run I = B - W, then W);\n"
         "                     numbers like 2, 1.5 or 3/2; a:b:c gives one time per rank\n"
         "  --p2p-latency T    delay of every activation or gradient sent between ranks (0)\n"
         "  --json             print {\"ranks\", \"makespan\", \"bubble_fraction\", "
         "\"peak_inflight\"}\n"
         "  --trace FILE       write a Chrome trace / Perfetto JSON timeline\n"
         "  --svg FILE         write an SVG picture of the timeline\n";
}

int runScheduleCli(std::span<const std::string> args, std::ostream& out, std::ostream& err) {
  try {
    CliOptions options = parseArgs(args);
    if (options.help) {
      out << scheduleCliHelp();
      return 0;
    }
    return run(options, out);
  } catch (const UsageError& error) {
    err << "meshflow schedule: " << error.what() << " (see meshflow schedule --help)\n";
    return 2;
  } catch (const std::exception& error) {
    err << "meshflow schedule: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace meshflow::passes
