// Pipeline schedules: the per-rank order of forward and backward work.
//
// A schedule says, for each pipeline rank, in which order it runs the forward (F)
// and backward work of every microbatch on every model chunk it holds. Ordinary
// schedules have one backward action (B); zero-bubble schedules split it into the
// input gradient (I, on the critical path) and the weight gradient (W, movable).
//
// Canonical text of an action: the kind letter and the microbatch, plus `.c` for
// chunk c when the schedule has more than one chunk per rank: `F3`, `B3`, `I3`,
// `W3`, `F3.1`. The text of a whole schedule is a header line and one line per
// rank, and parses back to an equal schedule:
//
//   schedule 1f1b stages=2 microbatches=3 chunks=1
//   rank 0: F0 F1 B0 F2 B1 B2
//   rank 1: F0 B0 F1 B1 F2 B2
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace meshflow::ir {

enum class ActionKind : uint8_t {
  kForward,     // F
  kBackward,    // B: input and weight gradient together
  kInputGrad,   // I: input gradient only (zero-bubble schedules)
  kWeightGrad,  // W: weight gradient only (zero-bubble schedules)
  // R: a forward rerun for a backward, rebuilding the activations its stage
  // did not keep (activation recomputation). Schedules never contain it; the
  // lowering puts one before a recomputing stage's B or I (ir/Program.h).
  kRecompute,
};

/// The letter of an action kind: F, B, I, W or R.
char actionKindLetter(ActionKind kind);

/// One unit of work of one rank: `kind` for `microbatch` on the rank's chunk `chunk`.
struct Action {
  ActionKind kind = ActionKind::kForward;
  int microbatch = 0;
  int chunk = 0;

  bool operator==(const Action&) const = default;
};

enum class ScheduleKind : uint8_t {
  kGPipe,
  kOneFOneB,
  kInterleaved,
  kZeroBubbleH1,
  kZeroBubbleV,
};

/// The user-facing name of a kind: gpipe, 1f1b, interleaved, zb-h1, zbv.
std::string_view scheduleKindName(ScheduleKind kind);
/// The kind with that user-facing name, if any.
std::optional<ScheduleKind> parseScheduleKind(std::string_view name);
/// Every kind, in the order documentation lists them.
std::vector<ScheduleKind> allScheduleKinds();

/// Where a virtual stage lives: which rank, and which of its chunks.
struct StageLocation {
  int rank = 0;
  int chunk = 0;
};

struct PipelineSchedule {
  ScheduleKind kind = ScheduleKind::kOneFOneB;
  int stages = 1;                          // p: pipeline ranks
  int microbatches = 1;                    // m
  int chunks = 1;                          // v: model chunks per rank
  std::vector<std::vector<Action>> ranks;  // ranks[r]: rank r's actions in order

  /// p·v: the number of virtual stages the model is cut into.
  int virtualStages() const { return stages * chunks; }
  /// The virtual stage that chunk `chunk` of rank `rank` runs. Interleaved
  /// schedules place chunk c of rank r at c·p + r; ZB-V places its two chunks in
  /// a V, chunk 0 at r and chunk 1 at 2p − 1 − r, so rank 0 holds both ends.
  int virtualStage(int rank, int chunk) const;
  /// The inverse of virtualStage().
  StageLocation locate(int virtualStage) const;
  /// True when backward work is split into I and W actions.
  bool splitsBackward() const;

  bool operator==(const PipelineSchedule&) const = default;
};

/// Malformed schedule or action text; the message says what was expected.
class ScheduleParseError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Canonical text of an action; `.c` is written only when `chunks` > 1.
std::string actionText(const Action& action, int chunks);
/// Parses `F3`, `B3`, `I3`, `W3` or `F3.1`; throws ScheduleParseError.
Action parseAction(std::string_view text);

/// Canonical text of a whole schedule (see the file comment).
std::string scheduleText(const PipelineSchedule& schedule);
/// Parses the text scheduleText() writes; throws ScheduleParseError.
PipelineSchedule parseScheduleText(std::string_view text);

}  // namespace meshflow::ir
