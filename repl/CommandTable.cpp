#include "repl/Commands.h"

namespace meshflow::cli {

std::span<const Command> commands() {
  static constexpr Command table[] = {
      {"run", "run a .mesh script", runCommand},
      {"check", "report a script's diagnostics without running it", checkCommand},
      {"repl", "interactive session", replCommand},
      {"dump", "trace a model and print its graph with per-op FLOPs", dumpCommand},
      {"plan", "plan a model's parallel training on a cluster", planCommand},
      {"solve-stages", "solve an explicit inter-op stage problem (JSON)", solveStagesCommand},
      {"schedule", "build a pipeline schedule and show its timeline", scheduleCommand},
      {"solve-sharding", "solve an explicit intra-op sharding problem", solveShardingCommand},
  };
  return table;
}

}  // namespace meshflow::cli
