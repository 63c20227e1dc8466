#include "passes/ShardingCbc.h"

#include <coin/CbcEventHandler.hpp>
#include <coin/CbcModel.hpp>
#include <coin/CbcSolver.hpp>
#include <coin/ClpEventHandler.hpp>
#include <coin/OsiClpSolverInterface.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>
#include <string>

namespace meshflow::passes::sharding {

namespace {

using Clock = std::chrono::steady_clock;

bool stopRequested(const std::atomic<bool>* flag) {
  return flag != nullptr && flag->load(std::memory_order_relaxed);
}

// What ends a solve early: the caller's flag, or the wall-clock deadline.
// CBC's own time limit is looked at between its phases only (measured: 2.2 s
// of preprocessing and root cuts on a 200-op random DAG given 0.001 s), so
// the handlers below look at the deadline too: CBC's at the limit (a clean
// stop between nodes, which keeps CBC's bound), Clp's this share of the
// limit later (inside an LP, which costs the bound): CBC in its tree stops
// cleanly first, CBC stuck in its root is cut short.
constexpr double kLpGraceShare = 0.03;

struct StopSignal {
  const std::atomic<bool>* flag = nullptr;
  Clock::time_point deadline;
  Clock::time_point lpDeadline;
  // Clp stopped an LP at the deadline: CBC may then have judged a node by an
  // unfinished LP, so neither its bound nor a proof can be trusted.
  std::atomic<bool> lpCutShort{false};

  bool flagged() const { return stopRequested(flag); }
  bool late() const { return Clock::now() > deadline; }
  bool lpLate() const { return Clock::now() > lpDeadline; }
};

// Stops CBC at its next event (a node done, a heuristic pass, a solution) once
// the flag is set or the deadline passed. CBC's driver copies the model, and
// the handler with it: the copy shares the signal.
class StopHandler : public CbcEventHandler {
 public:
  explicit StopHandler(const StopSignal* signal) : signal_(signal) {}
  CbcAction event(CbcEvent) override {
    return signal_->flagged() || signal_->late() ? stop : noAction;
  }
  CbcEventHandler* clone() const override { return new StopHandler(*this); }

 private:
  const StopSignal* signal_;
};

// The same for Clp, the LP solver under CBC (and under its preprocessing):
// each simplex iteration asks, so a stop does not wait for a long LP. What a
// solve stopped by the flag leaves is never used; one stopped at the deadline
// keeps its best answer (judged exactly by the caller), not its bound.
class LpStopHandler : public ClpEventHandler {
 public:
  explicit LpStopHandler(StopSignal* signal) : signal_(signal) {}
  int event(Event) override {
    constexpr int kStopped = 5;  // Stopped by the event handler.
    if (signal_->flagged()) return kStopped;
    if (!signal_->lpLate()) return -1;
    signal_->lpCutShort.store(true, std::memory_order_relaxed);
    return kStopped;
  }
  ClpEventHandler* clone() const override { return new LpStopHandler(*this); }

 private:
  StopSignal* signal_;
};

// CBC's driver reads its arguments through process-wide state (the read
// position in argv is a global), so two solves at once would read each
// other's arguments: one solve at a time in the whole process.
std::mutex& driverMutex() {
  static std::mutex m;
  return m;
}

// CBC's own driver (what the cbc program and the C interface run: preprocessing,
// cuts and heuristics at their defaults), single-threaded, silent, on the wall clock.
std::vector<std::string> driverArguments(const MilpLimits& limits) {
  std::vector<std::string> args{"meshflow", "-log",      "0",       "-slog",
                                "0",        "-threads",  "0",       "-timeMode",
                                "elapsed",  "-seconds",  fmt::format("{:.3f}", limits.seconds)};
  if (limits.nodes > 0) {
    args.push_back("-maxNodes");
    args.push_back(std::to_string(limits.nodes));
  }
  if (std::isfinite(limits.cutoff)) {
    args.push_back("-cutoff");
    args.push_back(fmt::format("{:.17g}", limits.cutoff));
  }
  args.push_back("-solve");
  args.push_back("-quit");
  return args;
}

}  // namespace

int Milp::addRow(double lower, double upper) {
  rowLower_.push_back(lower);
  rowUpper_.push_back(upper);
  return static_cast<int>(rowLower_.size()) - 1;
}

int Milp::addColumn(double objective, double upper, bool integer,
                    const std::vector<std::pair<int, double>>& entries) {
  objective_.push_back(objective);
  columnUpper_.push_back(upper);
  integer_.push_back(integer);
  for (auto [row, coefficient] : entries) {
    index_.push_back(row);
    value_.push_back(coefficient);
  }
  start_.push_back(static_cast<int>(index_.size()));
  return columns() - 1;
}

bool Milp::withinClpRange() const {
  constexpr double kLargest = 1e20;
  const auto small = [](double x) { return std::isfinite(x) && std::abs(x) < kLargest; };
  return std::all_of(objective_.begin(), objective_.end(), small) && std::all_of(value_.begin(), value_.end(), small);
}

MilpResult Milp::solve(const MilpLimits& limits) const {
  MilpResult r;
  if (!withinClpRange()) {
    r.outOfRange = true;
    return r;
  }
  auto start = std::chrono::steady_clock::now();
  std::lock_guard lock(driverMutex());
  if (stopRequested(limits.stop)) {
    r.stopped = true;
    return r;
  }
  // Time spent waiting for another solve counts against this one's limit.
  MilpLimits left = limits;
  left.seconds = std::max(
      0.001, limits.seconds -
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  OsiClpSolverInterface lp;
  std::vector<double> columnLower(objective_.size(), 0.0);
  lp.loadProblem(columns(), rows(), start_.data(), index_.data(), value_.data(),
                 columnLower.data(), columnUpper_.data(), objective_.data(), rowLower_.data(),
                 rowUpper_.data());
  for (int c = 0; c < columns(); ++c) {
    if (integer_[c]) lp.setInteger(c);
  }
  StopSignal signal;
  signal.flag = limits.stop;
  auto after = [&](double seconds) {
    return start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  };
  signal.deadline = after(limits.seconds);
  signal.lpDeadline = after(limits.seconds * (1 + kLpGraceShare));
  LpStopHandler lpStop(&signal);
  lp.getModelPtr()->passInEventHandler(&lpStop);
  CbcModel model(lp);
  CbcSolverUsefulData data;
  CbcMain0(model, data);
  StopHandler handler(&signal);
  model.passInEventHandler(&handler);
  std::vector<std::string> args = driverArguments(left);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, nullptr, data);
  r.stopped = stopRequested(limits.stop);
  bool cutShort = signal.lpCutShort.load();
  r.optimal = model.isProvenOptimal() && !r.stopped && !cutShort;
  // Stopped by a limit, CBC may report "infeasible" for "found nothing yet";
  // out of time in its initial LP solve, it says "infeasible" without saying why.
  double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bool limited = r.stopped || model.isSecondsLimitReached() || model.isNodeLimitReached() ||
                 model.isInitialSolveAbandoned() || model.status() != 0 ||
                 spent >= limits.seconds;
  r.infeasible = !limited && !cutShort && model.isProvenInfeasible();
  r.bound = model.getBestPossibleObjValue();
  // Unfinished, CBC's bound is one on the answers below the cutoff (and so on
  // the optimum, which an answer in hand puts below it) only when it is below
  // the cutoff: stopped before its root was solved, it reports the cutoff.
  bool unfinished = !r.optimal && !r.infeasible;
  if (cutShort || (unfinished && !(r.bound < limits.cutoff))) {
    r.bound = -std::numeric_limits<double>::infinity();
  }
  if (const double* best = model.bestSolution()) {
    r.values = std::vector<double>(best, best + columns());
  }
  if (r.optimal && r.values) r.bound = model.getObjValue();
  return r;
}

}  // namespace meshflow::passes::sharding
