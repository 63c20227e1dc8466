#include "runtime/sim/TimelineText.h"

#include <algorithm>
#include <cctype>
#include <map>

namespace meshflow::runtime::sim {
namespace {

// The letter of a compute instruction: the action (lower case for odd
// microbatches, so that neighbours stay apart) or U for the optimizer step.
char letterOf(const ir::Instruction& in) {
  if (in.op == ir::Opcode::kUpdate) return 'U';
  char letter = ir::actionKindLetter(in.action);
  return in.microbatch % 2 ? static_cast<char>(std::tolower(letter)) : letter;
}

}  // namespace

std::string timelineRow(const ir::Program& program, int device,
                        const std::vector<TimedInstruction>& timeline, double span, int columns) {
  if (!(span > 0)) return std::string(static_cast<std::size_t>(columns), '.');
  const double width = span / columns;
  std::vector<std::map<char, double>> cover(static_cast<std::size_t>(columns));
  for (const TimedInstruction& timed : timeline) {
    const ir::Instruction& in = program.devices[static_cast<std::size_t>(device)].code[timed.index];
    if (in.op != ir::Opcode::kRun && in.op != ir::Opcode::kUpdate) continue;
    int first = std::clamp(static_cast<int>(timed.start / width), 0, columns - 1);
    int last = std::clamp(static_cast<int>(timed.end / width), 0, columns - 1);
    for (int c = first; c <= last; ++c) {
      double overlap = std::min(timed.end, (c + 1) * width) - std::max(timed.start, c * width);
      if (overlap > 0) cover[static_cast<std::size_t>(c)][letterOf(in)] += overlap;
    }
  }
  std::string row;
  for (const auto& column : cover) {
    char best = '.';
    double most = 0, busy = 0;
    for (const auto& [letter, seconds] : column) {
      busy += seconds;
      if (seconds > most) {
        most = seconds;
        best = letter;
      }
    }
    row += busy * 2 >= width ? best : '.';
  }
  return row;
}

}  // namespace meshflow::runtime::sim
