// The subcommands of the `meshflow` executable. Each takes the arguments after
// its name and returns the process exit code (0 success, 1 error, 2 usage).
#pragma once

#include <iosfwd>
#include <span>
#include <string>

namespace meshflow::cli {

using Args = std::span<const std::string>;

struct Command {
  const char* name;
  const char* summary;
  int (*run)(Args args, std::ostream& out, std::ostream& err);
};

/// All subcommands in the order `meshflow --help` lists them.
std::span<const Command> commands();

int runCommand(Args args, std::ostream& out, std::ostream& err);
int checkCommand(Args args, std::ostream& out, std::ostream& err);
int replCommand(Args args, std::ostream& out, std::ostream& err);
int dumpCommand(Args args, std::ostream& out, std::ostream& err);
int planCommand(Args args, std::ostream& out, std::ostream& err);
int scheduleCommand(Args args, std::ostream& out, std::ostream& err);
int solveShardingCommand(Args args, std::ostream& out, std::ostream& err);
int solveStagesCommand(Args args, std::ostream& out, std::ostream& err);

}  // namespace meshflow::cli
