// The control a caller hands the planner and the solvers: a cancellation flag
// checked at safe points, a time budget, a progress callback, and the time
// spent in each pass. It is the one seam through which the REPL's Ctrl-C,
// `--time-budget` and the progress line reach planning (docs/planning.md,
// "Time budget, cancellation and progress").
//
//   PlanControl control;
//   control.setTimeBudget(60);
//   control.setProgress([](const PlanProgress& p) { ... });
//   request.control = &control;            // passes/Planner.h
//   planTraining(graph, cluster, request); // may throw PlanInterrupted
//   for (const PassTime& t : control.passTimes()) ...
//
// Safe points are the heads of the planner's and the solvers' loops: a
// candidate plan, a layer's intra-op solve, a t_max run of the stage DP. A
// solve in progress is not torn down (the sharding solver's own budget is cut
// to the time left instead), so cancellation takes effect within one solve.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace meshflow::passes {

/// What the progress callback receives.
struct PlanProgress {
  std::string pass;            ///< The pass running now ("layer costs", ...).
  std::int64_t candidates = 0; ///< Work searched so far: solves, DP runs, candidate plans.
  double elapsedSeconds = 0;   ///< Since the run began.
  bool finished = false;       ///< The last call of a run: clear a progress line.
};

/// Seconds spent in one pass over a run (a pass entered several times adds up).
struct PassTime {
  std::string pass;
  double seconds = 0;
};

/// Thrown at a safe point when the run was cancelled or ran out of time. Not a
/// std::runtime_error, so that code which turns solver failures into planning
/// errors lets it through.
class PlanInterrupted : public std::exception {
 public:
  enum class Reason { kCancelled, kOutOfTime };
  PlanInterrupted(Reason reason, std::string message)
      : reason_(reason), message_(std::move(message)) {}
  Reason reason() const { return reason_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  Reason reason_;
  std::string message_;
};

class PlanControl {
 public:
  using Clock = std::chrono::steady_clock;
  using ProgressFn = std::function<void(const PlanProgress&)>;
  /// How often, at most, the progress callback is called during a run.
  static constexpr std::chrono::milliseconds kProgressInterval{100};

  PlanControl() = default;
  PlanControl(const PlanControl&) = delete;
  PlanControl& operator=(const PlanControl&) = delete;

  // ---- settings (before a run) ----

  /// Seconds each run may take; empty: no limit. 0 stops at the first safe
  /// point (tests use it).
  void setTimeBudget(std::optional<double> seconds) { budget_ = seconds; }
  std::optional<double> timeBudget() const { return budget_; }
  /// Called from the thread that reaches a safe point (one at a time): at the
  /// run's first safe point, then at most once per `interval`, and at its end.
  void setProgress(ProgressFn progress, Clock::duration interval = kProgressInterval) {
    progress_ = std::move(progress);
    interval_ = interval;
  }
  /// A flag owned elsewhere (an interpreter's Ctrl-C flag) that cancels as
  /// cancel() does; it must outlive the control.
  void watch(const std::atomic<bool>* flag) { watched_ = flag; }

  /// Cancels the run in progress at its next safe point. Safe from any thread
  /// and from a signal handler. A run that begins later clears it.
  void cancel() { cancelled_.store(true, std::memory_order_relaxed); }

  // ---- a run ----

  /// Starts a run: the clock, the counters and the pass times restart.
  void begin();
  /// Ends a run: a last progress call with finished = true, if any was made.
  void end();
  /// A safe point: counts `candidates`, calls the progress callback when it
  /// is due, and throws PlanInterrupted when cancelled or out of time.
  void check(std::int64_t candidates = 0);
  bool cancelled() const;
  bool outOfTime() const;
  /// Seconds left of the budget (infinity without one, never negative).
  double secondsLeft() const;
  double elapsedSeconds() const;
  std::int64_t candidates() const { return candidates_.load(std::memory_order_relaxed); }
  /// The passes of the last run in the order first entered, with their own
  /// time (a nested pass's time is not also its parent's).
  std::vector<PassTime> passTimes() const;

  /// While alive, time goes to pass `name`; the pass it interrupted resumes
  /// when it ends. A null control makes it a no-op.
  class Pass {
   public:
    Pass(PlanControl* control, std::string name);
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

   private:
    PlanControl* control_;
    std::string previous_;
  };

 private:
  void switchPass(const std::string& name);
  void report(bool finished);
  [[noreturn]] void stop(PlanInterrupted::Reason reason);

  std::optional<double> budget_;
  ProgressFn progress_;
  Clock::duration interval_ = kProgressInterval;
  const std::atomic<bool>* watched_ = nullptr;
  std::atomic<bool> cancelled_{false};

  Clock::time_point start_{};
  std::atomic<std::int64_t> candidates_{0};
  std::atomic<Clock::rep> lastReport_{0};  // the clock's count at the last report
  mutable std::mutex mutex_;  // guards what follows
  std::string pass_;
  Clock::time_point passSince_{};
  std::vector<PassTime> times_;
  bool reported_ = false;
};

/// A safe point of an optional control: nothing without one.
inline void checkpoint(PlanControl* control, std::int64_t candidates = 0) {
  if (control) control->check(candidates);
}

}  // namespace meshflow::passes
