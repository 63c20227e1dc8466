// Everything one Interpreter owns. No part of it is shared between interpreters.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "interp/Environment.h"
#include "interp/Heap.h"
#include "interp/Modules.h"
#include "meshflow/meshflow.h"
#include "passes/PlanControl.h"

namespace meshflow::interp {

class Tracer;

class InterpreterState {
 public:
  explicit InterpreterState(Config config);
  ~InterpreterState();

  Config config;
  Heap heap;
  std::shared_ptr<Environment> builtins;  // parent of every module's scope
  std::shared_ptr<Environment> globals;   // the main scope: scripts, the REPL, the host
  ModuleLoader modules;
  /// Sources run in the main scope; functions defined there point into them.
  std::vector<std::shared_ptr<const ast::Program>> programs;

  // Per top-level eval: reset by beginRun().
  std::uint64_t steps = 0;
  std::uint32_t callDepth = 0;
  std::uintptr_t stackLimit = 0;  // the native stack may not grow below this address
  /// The model being traced, if any (interp/Tracing.h).
  std::shared_ptr<Tracer> tracer;
  /// Set by Interpreter::interrupt (possibly from a signal handler).
  std::atomic<bool> interrupted{false};
  /// Remarks for the Status of this run that are not errors (what a
  /// redefinition at the prompt replaced).
  std::vector<Diagnostic> notes;
  /// What every planning of this interpreter runs under: Ctrl-C (interrupted),
  /// the time budget of Config::limits, Config::planProgress; it keeps the
  /// last run's pass times.
  passes::PlanControl planControl;

  /// Resets the per-run counters and measures the calling thread's stack.
  void beginRun();
};

}  // namespace meshflow::interp
