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

bool stopRequested(const std::atomic<bool>* flag) {
  return flag != nullptr && flag->load(std::memory_order_relaxed);
}

// Stops CBC at its next event (a node done, a heuristic pass, a solution) once
// the flag is set. CBC's driver copies the model, and the handler with it: the
// copy shares the flag.
class StopHandler : public CbcEventHandler {
 public:
  explicit StopHandler(const std::atomic<bool>* flag) : flag_(flag) {}
  CbcAction event(CbcEvent) override {
    return stopRequested(flag_) ? stop : noAction;
  }
  CbcEventHandler* clone() const override { return new StopHandler(*this); }

 private:
  const std::atomic<bool>* flag_;
};

// The same for Clp, the LP solver under CBC (and under its preprocessing):
// each simplex iteration asks, so a stop does not wait for a long LP. What a
// stopped solve leaves is never used.
class LpStopHandler : public ClpEventHandler {
 public:
  explicit LpStopHandler(const std::atomic<bool>* flag) : flag_(flag) {}
  int event(Event) override {
    return stopRequested(flag_) ? 5 : -1;  // 5: stopped by the event handler.
  }
  ClpEventHandler* clone() const override { return new LpStopHandler(*this); }

 private:
  const std::atomic<bool>* flag_;
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
  LpStopHandler lpStop(limits.stop);
  if (limits.stop != nullptr) lp.getModelPtr()->passInEventHandler(&lpStop);
  CbcModel model(lp);
  CbcSolverUsefulData data;
  CbcMain0(model, data);
  StopHandler handler(limits.stop);
  model.passInEventHandler(&handler);
  std::vector<std::string> args = driverArguments(left);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  CbcMain1(static_cast<int>(argv.size()), argv.data(), model, nullptr, data);
  r.stopped = stopRequested(limits.stop);
  r.optimal = model.isProvenOptimal() && !r.stopped;
  // Stopped by a limit, CBC may report "infeasible" for "found nothing yet";
  // out of time in its initial LP solve, it says "infeasible" without saying why.
  double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  bool limited = r.stopped || model.isSecondsLimitReached() || model.isNodeLimitReached() ||
                 model.isInitialSolveAbandoned() || model.status() != 0 ||
                 spent >= limits.seconds;
  r.infeasible = !limited && model.isProvenInfeasible();
  r.bound = model.getBestPossibleObjValue();
  if (const double* best = model.bestSolution()) {
    r.values = std::vector<double>(best, best + columns());
  }
  if (r.optimal && r.values) r.bound = model.getObjValue();
  return r;
}

}  // namespace meshflow::passes::sharding
