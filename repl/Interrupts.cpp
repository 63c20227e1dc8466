#include "repl/Interrupts.h"

#include <signal.h>

#include <atomic>

namespace meshflow::cli {
namespace {

struct Target {
  void (*interrupt)(void*);
  void* context;
};

// A signal handler reaches its target only through a global; this one is
// written by the guard alone, and read by the handler alone.
std::atomic<const Target*> gTarget{nullptr};
struct sigaction gPrevious {};

void onSigint(int) {
  if (const Target* target = gTarget.load()) target->interrupt(target->context);
}

}  // namespace

InterruptOnSigint::InterruptOnSigint(void (*interrupt)(void*), void* context) {
  gTarget.store(new Target{interrupt, context});
  struct sigaction action {};
  action.sa_handler = onSigint;
  sigemptyset(&action.sa_mask);
  // SA_RESTART: a read interrupted by Ctrl-C (the REPL waiting for a line)
  // resumes instead of failing.
  action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &action, &gPrevious);
}

InterruptOnSigint::~InterruptOnSigint() {
  sigaction(SIGINT, &gPrevious, nullptr);
  delete gTarget.exchange(nullptr);
}

}  // namespace meshflow::cli
