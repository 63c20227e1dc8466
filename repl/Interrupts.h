// Ctrl-C while a script runs: SIGINT asks the interpreter to stop at its next
// step (Interpreter::interrupt) instead of killing the process, so the REPL
// returns to its prompt and `meshflow run` reports where training stopped.
#pragma once

namespace meshflow::cli {

/// While alive, SIGINT calls `interrupt(context)`; the previous handler comes
/// back when it is destroyed. `interrupt` runs in the signal handler: it may
/// only do what is safe there (an atomic store, as Interpreter::interrupt does).
class InterruptOnSigint {
 public:
  InterruptOnSigint(void (*interrupt)(void*), void* context);
  ~InterruptOnSigint();
  InterruptOnSigint(const InterruptOnSigint&) = delete;
  InterruptOnSigint& operator=(const InterruptOnSigint&) = delete;
};

}  // namespace meshflow::cli
