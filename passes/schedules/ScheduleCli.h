// The core of `meshflow schedule`, kept in passes/ so it is tested without the
// interpreter; repl/ScheduleCommand.cpp only forwards to it.
#pragma once

#include <iosfwd>
#include <span>
#include <string>

namespace meshflow::passes {

/// Runs `meshflow schedule` with the arguments after the command name. Returns the
/// exit code: 0 success, 1 a bad value (rule broken, unreadable times, unwritable
/// file), 2 a malformed command line. Errors are one line on `err`.
///
///   meshflow schedule --pipeline KIND --stages P --microbatches M [--virtual V]
///       [--group G] [--times F=1,B=2,W=1] [--p2p-latency T] [--json]
///       [--trace FILE] [--svg FILE] [--help]
int runScheduleCli(std::span<const std::string> args, std::ostream& out, std::ostream& err);

/// The text `meshflow schedule --help` prints.
std::string scheduleCliHelp();

}  // namespace meshflow::passes
