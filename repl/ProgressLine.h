// The planning progress line: after about a second of planning, one line on a
// terminal that says which pass runs, how many candidates were searched and how
// long it has taken, rewritten in place and erased when planning ends. Never
// in a file or a pipe, so piped output and goldens stay as they are.
#pragma once

#include <functional>
#include <string>

#include "meshflow/meshflow.h"

namespace meshflow::cli {

/// Planning shorter than this shows no line.
constexpr double kProgressDelaySeconds = 1.0;

/// The line's text: `planning: layer costs, 1234 candidates searched, 2.4 s (Ctrl-C cancels)`.
std::string progressText(const PlanProgress& progress);

/// A Config::planProgress that draws the line on `fd`, or an empty function
/// when `fd` is not a terminal (or TERM is "dumb").
std::function<void(const PlanProgress&)> progressLineFor(int fd);

}  // namespace meshflow::cli
