#include "ir/PipelineSchedule.h"

#include <array>
#include <charconv>
#include <sstream>
#include <utility>

namespace meshflow::ir {
namespace {

struct KindName {
  ScheduleKind kind;
  std::string_view name;
};

constexpr std::array<KindName, 5> kKindNames{{
    {ScheduleKind::kGPipe, "gpipe"},
    {ScheduleKind::kOneFOneB, "1f1b"},
    {ScheduleKind::kInterleaved, "interleaved"},
    {ScheduleKind::kZeroBubbleH1, "zb-h1"},
    {ScheduleKind::kZeroBubbleV, "zbv"},
}};

std::optional<ActionKind> kindOfLetter(char letter) {
  switch (letter) {
    case 'F':
      return ActionKind::kForward;
    case 'B':
      return ActionKind::kBackward;
    case 'I':
      return ActionKind::kInputGrad;
    case 'W':
      return ActionKind::kWeightGrad;
    default:
      return std::nullopt;
  }
}

// Parses a whole string_view as a non-negative decimal integer.
std::optional<int> parseCount(std::string_view text) {
  int value = 0;
  if (text.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

std::vector<std::string_view> splitWords(std::string_view line) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < line.size()) {
    size_t start = line.find_first_not_of(" \t\r", pos);
    if (start == std::string_view::npos) break;
    size_t end = line.find_first_of(" \t\r", start);
    if (end == std::string_view::npos) end = line.size();
    words.push_back(line.substr(start, end - start));
    pos = end;
  }
  return words;
}

std::vector<std::string_view> splitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!splitWords(line).empty()) lines.push_back(line);
    pos = end + 1;
  }
  return lines;
}

// Reads `key=N` from a header word.
int headerField(std::string_view word, std::string_view key) {
  std::string prefix = std::string(key) + "=";
  std::optional<int> value;
  if (word.substr(0, prefix.size()) == prefix) value = parseCount(word.substr(prefix.size()));
  if (!value || *value < 1) {
    throw ScheduleParseError("expected '" + prefix + "N' with N >= 1, got '" + std::string(word) +
                             "'");
  }
  return *value;
}

PipelineSchedule parseHeader(std::string_view line) {
  std::vector<std::string_view> words = splitWords(line);
  if (words.size() != 5 || words[0] != "schedule") {
    throw ScheduleParseError("expected 'schedule KIND stages=P microbatches=M chunks=V', got '" +
                             std::string(line) + "'");
  }
  std::optional<ScheduleKind> kind = parseScheduleKind(words[1]);
  if (!kind) throw ScheduleParseError("unknown schedule kind '" + std::string(words[1]) + "'");
  PipelineSchedule schedule;
  schedule.kind = *kind;
  schedule.stages = headerField(words[2], "stages");
  schedule.microbatches = headerField(words[3], "microbatches");
  schedule.chunks = headerField(words[4], "chunks");
  return schedule;
}

std::vector<Action> parseRankLine(std::string_view line, int rank) {
  std::vector<std::string_view> words = splitWords(line);
  std::string label = "rank " + std::to_string(rank) + ":";
  if (words.size() < 2 || std::string(words[0]) + " " + std::string(words[1]) != label) {
    throw ScheduleParseError("expected '" + label + " ACTION ...', got '" + std::string(line) +
                             "'");
  }
  std::vector<Action> actions;
  for (size_t i = 2; i < words.size(); ++i) actions.push_back(parseAction(words[i]));
  return actions;
}

}  // namespace

char actionKindLetter(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward:
      return 'F';
    case ActionKind::kBackward:
      return 'B';
    case ActionKind::kInputGrad:
      return 'I';
    case ActionKind::kWeightGrad:
      return 'W';
    case ActionKind::kRecompute:
      return 'R';
  }
  return '?';
}

std::string_view scheduleKindName(ScheduleKind kind) {
  for (const KindName& entry : kKindNames) {
    if (entry.kind == kind) return entry.name;
  }
  return "?";
}

std::optional<ScheduleKind> parseScheduleKind(std::string_view name) {
  for (const KindName& entry : kKindNames) {
    if (entry.name == name) return entry.kind;
  }
  return std::nullopt;
}

std::vector<ScheduleKind> allScheduleKinds() {
  std::vector<ScheduleKind> kinds;
  for (const KindName& entry : kKindNames) kinds.push_back(entry.kind);
  return kinds;
}

int PipelineSchedule::virtualStage(int rank, int chunk) const {
  if (kind == ScheduleKind::kZeroBubbleV) return chunk == 0 ? rank : 2 * stages - 1 - rank;
  return chunk * stages + rank;
}

StageLocation PipelineSchedule::locate(int virtualStage) const {
  if (kind == ScheduleKind::kZeroBubbleV && virtualStage >= stages) {
    return {2 * stages - 1 - virtualStage, 1};
  }
  return {virtualStage % stages, virtualStage / stages};
}

bool PipelineSchedule::splitsBackward() const {
  return kind == ScheduleKind::kZeroBubbleH1 || kind == ScheduleKind::kZeroBubbleV;
}

std::string actionText(const Action& action, int chunks) {
  std::string text(1, actionKindLetter(action.kind));
  text += std::to_string(action.microbatch);
  if (chunks > 1) text += "." + std::to_string(action.chunk);
  return text;
}

Action parseAction(std::string_view text) {
  auto fail = [&]() -> Action {
    throw ScheduleParseError("expected an action like F3, B3, I3, W3 or F3.1, got '" +
                             std::string(text) + "'");
  };
  if (text.size() < 2) return fail();
  std::optional<ActionKind> kind = kindOfLetter(text[0]);
  if (!kind) return fail();
  std::string_view rest = text.substr(1);
  size_t dot = rest.find('.');
  std::optional<int> microbatch = parseCount(rest.substr(0, dot));
  std::optional<int> chunk = dot == std::string_view::npos ? 0 : parseCount(rest.substr(dot + 1));
  if (!microbatch || !chunk) return fail();
  return Action{*kind, *microbatch, *chunk};
}

std::string scheduleText(const PipelineSchedule& schedule) {
  std::ostringstream out;
  out << "schedule " << scheduleKindName(schedule.kind) << " stages=" << schedule.stages
      << " microbatches=" << schedule.microbatches << " chunks=" << schedule.chunks << "\n";
  for (size_t r = 0; r < schedule.ranks.size(); ++r) {
    out << "rank " << r << ":";
    for (const Action& action : schedule.ranks[r]) {
      out << " " << actionText(action, schedule.chunks);
    }
    out << "\n";
  }
  return out.str();
}

PipelineSchedule parseScheduleText(std::string_view text) {
  std::vector<std::string_view> lines = splitLines(text);
  if (lines.empty()) throw ScheduleParseError("empty schedule text");
  PipelineSchedule schedule = parseHeader(lines[0]);
  if (lines.size() != static_cast<size_t>(schedule.stages) + 1) {
    throw ScheduleParseError("expected " + std::to_string(schedule.stages) + " rank lines, got " +
                             std::to_string(lines.size() - 1));
  }
  for (int r = 0; r < schedule.stages; ++r) {
    schedule.ranks.push_back(parseRankLine(lines[static_cast<size_t>(r) + 1], r));
  }
  return schedule;
}

}  // namespace meshflow::ir
