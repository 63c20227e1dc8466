// The error every schedule generator and evaluator throws for a request it cannot
// honour. The message names the rule that was broken, in words a user of
// `meshflow schedule` can act on ("interleaved needs microbatches to be a
// multiple of the group size 4, got 6").
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace meshflow::passes {

class ScheduleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Throws ScheduleError unless stages >= 1 and microbatches >= 1; `kind` names the
/// schedule in the message.
void requirePipelineShape(std::string_view kind, int stages, int microbatches);

}  // namespace meshflow::passes
