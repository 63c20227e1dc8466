// `meshflow run --backend cpu|mpi|cuda`: where the script's train() calls run
// their plans (docs/distributed.md).
#pragma once

#include <functional>
#include <ostream>

#include "meshflow/meshflow.h"
#include "repl/ScriptOptions.h"

namespace meshflow::cli {

/// Runs `script` (which evaluates the script with the config it is given and
/// returns its status) on options.backend and returns the exit code. cpu:
/// here. mpi: this process joins the MPI job; rank 0 runs the script as the
/// controller of the others, which serve it until it ends. cuda: refused
/// (not built). Errors go to `err`.
int runOnBackend(ScriptOptions& options, std::ostream& err, const std::function<Status(Config&)>& script);

}  // namespace meshflow::cli
