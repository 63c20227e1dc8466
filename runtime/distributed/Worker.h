// What a worker process (rank > 0 of a job, the mpi backend) does: wait for
// the controller's commands and carry them out on its device until told to
// exit (docs/distributed.md). Workers never read the script.
#pragma once

#include <iosfwd>
#include <string>

#include "runtime/distributed/ProcessGroup.h"

namespace meshflow::runtime {

/// Serves the controller until it says exit; returns the exit code it sends
/// (non-zero when the script failed). A controller that fails, or a run
/// that stops, ends the wait with a message on `err` and exit code 1.
int runWorker(ProcessGroup& group, std::ostream& err);

/// The controller's last word: every worker leaves runWorker with `code`
/// (and, when it is not 0, prints `message`).
void releaseWorkers(ProcessGroup& group, int code, const std::string& message);

}  // namespace meshflow::runtime
