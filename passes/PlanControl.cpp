#include "passes/PlanControl.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace meshflow::passes {
namespace {

double secondsBetween(PlanControl::Clock::time_point a, PlanControl::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

void PlanControl::begin() {
  cancelled_.store(false, std::memory_order_relaxed);
  candidates_.store(0, std::memory_order_relaxed);
  std::lock_guard lock(mutex_);
  start_ = passSince_ = Clock::now();
  // The first safe point reports at once; later ones once per interval.
  lastReport_.store((start_ - interval_).time_since_epoch().count(), std::memory_order_relaxed);
  pass_.clear();
  times_.clear();
  reported_ = false;
}

void PlanControl::end() {
  bool reported = false;
  {
    std::lock_guard lock(mutex_);
    switchPass("");
    reported = reported_;
  }
  // end() runs while an exception unwinds: a callback that throws is ignored.
  try {
    if (reported) report(true);
  } catch (...) {
  }
}

bool PlanControl::cancelled() const {
  return cancelled_.load(std::memory_order_relaxed) ||
         (watched_ && watched_->load(std::memory_order_relaxed));
}

bool PlanControl::outOfTime() const { return budget_ && elapsedSeconds() >= *budget_; }

double PlanControl::elapsedSeconds() const { return secondsBetween(start_, Clock::now()); }

double PlanControl::secondsLeft() const {
  if (!budget_) return std::numeric_limits<double>::infinity();
  return std::max(0.0, *budget_ - elapsedSeconds());
}

void PlanControl::check(std::int64_t candidates) {
  candidates_.fetch_add(candidates, std::memory_order_relaxed);
  if (cancelled()) stop(PlanInterrupted::Reason::kCancelled);
  if (outOfTime()) stop(PlanInterrupted::Reason::kOutOfTime);
  Clock::duration sinceReport =
      Clock::now().time_since_epoch() - Clock::duration(lastReport_.load(std::memory_order_relaxed));
  if (progress_ && sinceReport >= interval_) report(false);
}

void PlanControl::report(bool finished) {
  // One thread reports; the others go on searching.
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !progress_) return;
  lastReport_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  reported_ = true;
  progress_({pass_, candidates(), elapsedSeconds(), finished});
}

void PlanControl::stop(PlanInterrupted::Reason reason) {
  std::string where;
  {
    std::lock_guard lock(mutex_);
    where = pass_.empty() ? "" : fmt::format(" in {}", pass_);
  }
  std::int64_t searched = candidates();
  std::string after = fmt::format("after {} candidate{}", searched, searched == 1 ? "" : "s");
  if (reason == PlanInterrupted::Reason::kCancelled)
    throw PlanInterrupted(reason, fmt::format("planning cancelled{}, {}", where, after));
  throw PlanInterrupted(reason, fmt::format("planning ran out of its time budget of {:g} s{}, {}",
                                            *budget_, where, after));
}

// Charges the time since the last switch to the pass running, then runs `name`.
void PlanControl::switchPass(const std::string& name) {
  Clock::time_point now = Clock::now();
  if (!pass_.empty()) {
    auto it = std::find_if(times_.begin(), times_.end(),
                           [&](const PassTime& t) { return t.pass == pass_; });
    if (it == times_.end()) it = times_.insert(times_.end(), {pass_, 0});
    it->seconds += secondsBetween(passSince_, now);
  }
  pass_ = name;
  passSince_ = now;
}

std::vector<PassTime> PlanControl::passTimes() const {
  std::lock_guard lock(mutex_);
  return times_;
}

PlanControl::Pass::Pass(PlanControl* control, std::string name) : control_(control) {
  if (!control_) return;
  std::lock_guard lock(control_->mutex_);
  previous_ = control_->pass_;
  control_->switchPass(name);
}

PlanControl::Pass::~Pass() {
  if (!control_) return;
  std::lock_guard lock(control_->mutex_);
  control_->switchPass(previous_);
}

}  // namespace meshflow::passes
