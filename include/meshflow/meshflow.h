// The embedding API of meshflow: everything a C++ host includes.
//
//   meshflow::Config config;
//   config.write = [](std::string_view text) { std::cout << text; };
//   meshflow::Interpreter interp(config);
//   auto status = interp.eval("let x = 2 * 21\nprint(x)", "example.mesh");
//   if (!status) std::cerr << meshflow::renderAll(status.diagnostics);
//
// An Interpreter holds no global state: any number can live in one process,
// each used by one thread at a time. Errors never abort the host; they come
// back as diagnostics in a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "meshflow/Diagnostic.h"
#include "meshflow/Error.h"
#include "meshflow/Results.h"
#include "meshflow/Value.h"

namespace meshflow {

namespace interp {
class InterpreterState;
class ParsedModules;
}
namespace runtime {
class ProcessGroup;
}

/// Budgets that stop a runaway script with a diagnostic instead of a hang or a crash.
struct Limits {
  std::uint64_t maxSteps = 100'000'000;  // statements executed plus calls made
  std::uint32_t maxCallDepth = 1000;
  std::size_t maxMemoryBytes = std::size_t{4} << 30;  // held by script values
  /// Seconds one planning (plan(...), train(plan = auto)) may take before a
  /// TimeBudget diagnostic; `meshflow --time-budget`. 0 stops at the planner's
  /// first safe point (tests use it).
  double timeBudgetSeconds = 300;
};

/// Where a planning run stands, for Config::planProgress.
struct PlanProgress {
  std::string pass;             ///< "layer clustering", "layer costs", "stage search", ...
  std::int64_t candidates = 0;  ///< Searched so far: intra-op solves, DP runs, candidate plans.
  double elapsedSeconds = 0;
  bool finished = false;        ///< The run's last call (clear a progress line).
};

/// Seconds one planner pass took in the last planning run.
struct PassTime {
  std::string pass;
  double seconds = 0;
};

/// Folders a script may read (imports, data) and write (plans, traces, checkpoints).
/// Paths outside them are an AccessDenied diagnostic.
struct FileAccess {
  std::vector<std::string> readRoots;
  std::vector<std::string> writeRoots;
};

struct Config {
  /// Receives everything a script prints. Default: standard output.
  std::function<void(std::string_view)> write;
  /// Called for each diagnostic as it is reported (they are also in the Status).
  std::function<void(const Diagnostic&)> diagnostic;
  /// Folders searched for `import "file.mesh"` after the importing file's own folder.
  std::vector<std::string> importRoots;
  /// Where `import std.x` finds stdlib/x.mesh. Default: the stdlib of this build.
  std::string stdlibDir;
  FileAccess files;
  Limits limits;
  /// Lets a `let`, `var`, `fn`, `layer`, `model`, `cluster` or `schedule` at the
  /// top level replace an earlier definition of its name, with a note in the
  /// Status saying what it replaced, as the REPL does. Off: a Redefinition error.
  bool allowRedefinition = false;
  void* userData = nullptr;
  /// Where train() runs a plan's devices: null (the default) for threads of
  /// this process, the cpu backend. `meshflow run --backend mpi` sets the
  /// processes of its MPI job (runtime/distributed/ProcessGroup.h): this
  /// interpreter is their controller and each process runs one device
  /// (docs/distributed.md).
  std::shared_ptr<runtime::ProcessGroup> processes;
  /// `meshflow run --backend cuda`: train() runs every plan's devices on this
  /// machine's GPUs (the cuda backend, docs/gpu.md), whatever the cluster's
  /// device kind. GPU clusters (cuda(...), gpu(...) devices) run there anyway.
  bool cuda = false;
  /// Syntax trees of imported modules and of the sources given to eval() and
  /// check() that interpreters may share (interp/ParsedModules.h): a host that
  /// makes many short-lived interpreters, such as the fuzzer, parses each module
  /// once, and check() after eval() of the same text parses it once. Only a
  /// successful parse is shared, keyed by the file's path (the source's name) and
  /// text; every interpreter still runs it in a scope of its own. Null (the
  /// default): each interpreter parses what it runs.
  std::shared_ptr<interp::ParsedModules> parsedModules;
  /// Called when a planning run starts, then about every 0.1 s while it runs
  /// (from whichever planner thread reaches a safe point, one at a time), and
  /// once with finished = true at its end. Must not throw.
  std::function<void(const PlanProgress&)> planProgress;
  /// Called after every step train() runs (on the interpreter's thread).
  /// Must not throw.
  std::function<void(const TrainStep&)> onTrainStep;
};

/// A host's data loader (Interpreter::defineTokenData): the batch of `batch`
/// sequences of `seq` tokens for 0-based training step `step`. Throw (any
/// std::exception) to stop training with a DataError naming the loader.
using TokenLoader =
    std::function<TokenBatch(std::int64_t batch, std::int64_t seq, std::int64_t step)>;

/// The outcome of eval or call.
struct Status {
  bool ok = true;
  std::vector<Diagnostic> diagnostics;
  /// The value of the last statement when it was an expression (the REPL prints it),
  /// or the result of call().
  std::optional<Value> value;
  /// The source ended inside an unfinished construct (the REPL asks for more).
  bool incomplete = false;
  /// Remarks that are not errors (Severity::Note): what a redefinition replaced
  /// under Config::allowRedefinition.
  std::vector<Diagnostic> notes;

  explicit operator bool() const { return ok; }
};

/// What a host function receives: its arguments and the interpreter's user data.
class HostCall {
 public:
  HostCall(std::vector<Value> args, void* userData) : args_(std::move(args)), userData_(userData) {}
  std::size_t size() const { return args_.size(); }
  const Value& operator[](std::size_t i) const { return args_.at(i); }
  const std::vector<Value>& args() const { return args_; }
  void* userData() const { return userData_; }

 private:
  std::vector<Value> args_;
  void* userData_;
};

/// A function the host registers. Throw ScriptError (or any std::exception) to
/// report an error at the script's call site.
using HostFunction = std::function<Value(HostCall&)>;

class Interpreter {
 public:
  explicit Interpreter(Config config = {});
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  /// Parses and runs `source`; its definitions persist for later calls.
  Status eval(std::string_view source, std::string_view name = "<input>");
  /// Reads and runs a file (its folder becomes the base for its relative imports).
  Status evalFile(const std::string& path);
  /// Reports the diagnostics found without running: syntax, literals, misplaced
  /// statements, and imports that cannot be found or form a cycle.
  Status check(std::string_view source, std::string_view name = "<input>");
  Status checkFile(const std::string& path);

  /// A global of the main scope, if defined.
  std::optional<Value> global(const std::string& name) const;
  void setGlobal(const std::string& name, Value value);
  /// Calls a callable value (a script function, a builtin, a host function).
  Status call(const Value& callee, std::vector<Value> args);
  /// Calls the global named `name`.
  Status call(const std::string& name, std::vector<Value> args);

  /// Stops the running eval or call at its next step (a statement, a call, a
  /// training step) with an Interrupted diagnostic; definitions made so far
  /// stay. Safe to call from another thread or a signal handler (Ctrl-C).
  /// A request made while nothing runs is dropped when the next eval starts.
  void interrupt();

  /// The passes of the last planning run this interpreter made, in the order
  /// they first ran, each with its own seconds; empty before any.
  std::vector<PassTime> lastPlanningTimes() const;

  /// Calls method `method` of `object` with positional `args`, as
  /// `object.method(args...)` would: `p.timeline(72)`, `p.explain("block0")`,
  /// `p.export_megatron()`. An unknown method is an UnknownField diagnostic.
  Status callMethod(const Value& object, const std::string& method, std::vector<Value> args);

  /// A plan value (from plan(...)) as structs; nullopt for any other value.
  std::optional<PlanResult> planResult(const Value& plan) const;
  /// simulate(p)'s record as a struct; nullopt for a value of another shape.
  std::optional<SimulationResult> simulationResult(const Value& record) const;
  /// train(...)'s record as a struct; nullopt for a value of another shape.
  std::optional<TrainResult> trainResult(const Value& record) const;

  /// Defines the global `name` as training data that `loader` fills:
  /// `train(model, data = name, ...)` asks it for each step's batch. The model
  /// takes its inputs `tokens` and `labels` (i32[batch, seq]) from it.
  void defineTokenData(const std::string& name, TokenLoader loader);

  /// Forgets the modules imported so far, so that the next `import` of each
  /// reads and runs its file again (the REPL's :reload after an edit).
  void forgetImports();
  /// Registers `fn` as a global function taking exactly the parameters `params`
  /// (callable with positional or keyword arguments).
  void defineFunction(const std::string& name, std::vector<std::string> params, HostFunction fn);

  /// Every name visible in the main scope (builtins included), sorted.
  std::vector<std::string> globalNames() const;
  /// Field and method names of the value `expression` evaluates to, for completion
  /// after a dot; empty if the expression is not a plain name path.
  std::vector<std::string> memberNames(const std::string& expression) const;

  const Config& config() const;

 private:
  std::unique_ptr<interp::InterpreterState> state_;
};

/// Completions for the word ending at `cursor` in `line`, given the interpreter's
/// names: keywords, globals, and after `a.b.` the members of `a.b`. Sorted, unique.
std::vector<std::string> complete(const Interpreter& interpreter, std::string_view line,
                                  std::size_t cursor);

/// The version of meshflow, `major.minor.patch`.
std::string_view version();

}  // namespace meshflow
