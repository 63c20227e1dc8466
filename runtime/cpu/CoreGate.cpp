#include "runtime/cpu/CoreGate.h"

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

namespace meshflow::runtime::cpu {

CoreGate::CoreGate(int cores, int devices)
    : cores_(cores > 0 && cores < devices ? cores : 0),
      free_(cores_),
      turns_(static_cast<std::size_t>(std::max(devices, 0))),
      held_(static_cast<std::size_t>(std::max(devices, 0)), 0),
      lined_(static_cast<std::size_t>(std::max(devices, 0)), 0) {}

void CoreGate::lineUp() {
  if (cores_ == 0) return;
  std::lock_guard lock(mutex_);
  if (free_ != cores_ || !waiting_.empty())
    throw std::logic_error("devices can line up for the cores only while none holds or waits for one");
  for (std::size_t device = 0; device < held_.size(); ++device) {
    lined_[device] = 1;
    if (free_ > 0) {
      held_[device] = 1;
      --free_;
    } else {
      waiting_.push_back(static_cast<int>(device));
    }
  }
}

void CoreGate::acquire(int device) {
  if (cores_ == 0) return;
  std::unique_lock lock(mutex_);
  const auto d = static_cast<std::size_t>(device);
  if (std::exchange(lined_.at(d), 0)) {
    if (!held_[d]) awaitTurn(lock, device);  // in line already
    return;
  }
  if (held_[d]) throw std::logic_error("device " + std::to_string(device) + " asked for a second core");
  waitForCore(lock, device);
}

void CoreGate::waitForCore(std::unique_lock<std::mutex>& lock, int device) {
  waiting_.push_back(device);
  awaitTurn(lock, device);
}

void CoreGate::awaitTurn(std::unique_lock<std::mutex>& lock, int device) {
  turns_[static_cast<std::size_t>(device)].wait(lock, [&] { return free_ > 0 && waiting_.front() == device; });
  waiting_.pop_front();
  --free_;
  held_[static_cast<std::size_t>(device)] = 1;
  // The next in line may find a core free too.
  wakeFirst();
}

void CoreGate::wakeFirst() {
  if (free_ > 0 && !waiting_.empty()) turns_[static_cast<std::size_t>(waiting_.front())].notify_one();
}

void CoreGate::release(int device) {
  if (cores_ == 0) return;
  {
    std::lock_guard lock(mutex_);
    char& held = held_.at(static_cast<std::size_t>(device));
    if (!held) return;
    held = 0;
    ++free_;
    wakeFirst();
  }
}

void CoreGate::takeTurn(int device) {
  if (cores_ == 0) return;
  std::unique_lock lock(mutex_);
  char& held = held_.at(static_cast<std::size_t>(device));
  if (!held || waiting_.empty()) return;
  held = 0;
  ++free_;
  wakeFirst();
  waitForCore(lock, device);
}

bool CoreGate::holds(int device) {
  if (cores_ == 0) return false;
  std::lock_guard lock(mutex_);
  return held_.at(static_cast<std::size_t>(device)) != 0;
}

CoreGate::Hold::Hold(CoreGate* gate, int device) : gate_(gate), device_(device) {
  if (gate_) gate_->acquire(device_);
}

CoreGate::Hold::~Hold() {
  if (gate_) gate_->release(device_);
}

CoreGate::Yield::Yield(CoreGate* gate, int device)
    : gate_(gate), device_(device), exceptions_(std::uncaught_exceptions()) {
  if (gate_ && gate_->holds(device_)) {
    held_ = true;
    gate_->release(device_);
  }
}

CoreGate::Yield::~Yield() {
  if (held_ && std::uncaught_exceptions() == exceptions_) gate_->acquire(device_);
}

}  // namespace meshflow::runtime::cpu
