#include "interp/InterpreterState.h"

#include <pthread.h>

#include <cstdio>

#include "interp/Builtins.h"
#include "interp/StdlibLocation.h"
#include "interp/Tracing.h"

namespace meshflow::interp {
namespace {

Config withDefaults(Config config) {
  if (!config.write)
    config.write = [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
  if (config.stdlibDir.empty()) config.stdlibDir = defaultStdlibDir();
  return config;
}

// The lowest address the evaluator lets the native stack reach on this thread:
// a margin above the end of the stack, so deep recursion becomes a diagnostic.
std::uintptr_t measureStackLimit() {
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) != 0) return 0;
  void* base = nullptr;
  std::size_t size = 0;
  pthread_attr_getstack(&attributes, &base, &size);
  pthread_attr_destroy(&attributes);
  std::size_t margin = std::max<std::size_t>(256 * 1024, size / 4);
  if (margin >= size) return 0;
  return reinterpret_cast<std::uintptr_t>(base) + margin;
}

// Measured once per thread: a thread's stack does not move, and for the main
// thread glibc's pthread_getattr_np reads /proc/self/maps, which cost a fifth
// of a short eval (the fuzzer's inputs, a host calling a script per request).
std::uintptr_t stackLimitOfThisThread() {
  thread_local const std::uintptr_t limit = measureStackLimit();
  return limit;
}

}  // namespace

InterpreterState::InterpreterState(Config configIn)
    : config(withDefaults(std::move(configIn))),
      heap(config.limits.maxMemoryBytes),
      builtins(makeBuiltinScope()),
      globals(std::make_shared<Environment>(builtins)) {
  planControl.watch(&interrupted);
  planControl.setTimeBudget(config.limits.timeBudgetSeconds);
  if (auto progress = config.planProgress)
    planControl.setProgress([progress](const passes::PlanProgress& p) {
      progress({p.pass, p.candidates, p.elapsedSeconds, p.finished});
    });
}

InterpreterState::~InterpreterState() {
  // Cycles run through scopes too: clear them before the heap breaks the rest.
  globals->clear();
  modules.clear();
}

void InterpreterState::beginRun() {
  steps = 0;
  callDepth = 0;
  tracer.reset();
  notes.clear();
  interrupted.store(false, std::memory_order_relaxed);
  stackLimit = stackLimitOfThisThread();
}

}  // namespace meshflow::interp
