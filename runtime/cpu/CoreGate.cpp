#include "runtime/cpu/CoreGate.h"

#include <pthread.h>
#include <sched.h>

#include <exception>
#include <stdexcept>
#include <string>

namespace meshflow::runtime::cpu {
namespace {

// The CPUs this process may run on, in order.
std::vector<int> allowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

// Best effort: a thread whose affinity cannot be set still runs, only placed
// by the OS.
void setAffinity(pthread_t thread, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) CPU_SET(cpu, &set);
  (void)pthread_setaffinity_np(thread, sizeof(set), &set);
}

}  // namespace

CoreGate::CoreGate(int cores, int devices)
    : cores_(cores > 0 && cores < devices ? cores : 0),
      devices_(static_cast<std::size_t>(std::max(devices, 0))) {
  for (int slot = cores_ - 1; slot >= 0; --slot) freeSlots_.push_back(slot);
  std::vector<int> cpus = allowedCpus();
  // One CPU per core slot, or no pinning at all.
  if (static_cast<int>(cpus.size()) >= cores_) {
    cpuOfSlot_.assign(cpus.begin(), cpus.begin() + cores_);
    allCpus_ = cpus;
  }
}

void CoreGate::attachThread(int device) {
  if (cores_ == 0) return;
  std::lock_guard lock(mutex_);
  Device& d = devices_.at(static_cast<std::size_t>(device));
  d.thread = pthread_self();
  d.attached = true;
  d.pinnedCpu = -1;
}

void CoreGate::detachThread(int device) {
  if (cores_ == 0) return;
  std::lock_guard lock(mutex_);
  devices_.at(static_cast<std::size_t>(device)).attached = false;
}

void CoreGate::acquire(int device) {
  if (cores_ == 0) return;
  std::unique_lock lock(mutex_);
  if (devices_.at(static_cast<std::size_t>(device)).slot >= 0)
    throw std::logic_error("device " + std::to_string(device) + " asked for a second core");
  waitForCore(lock, device);
}

void CoreGate::waitForCore(std::unique_lock<std::mutex>& lock, int device) {
  Device& d = devices_[static_cast<std::size_t>(device)];
  waiting_.push_back(device);
  d.turn.wait(lock, [&] { return !freeSlots_.empty() && waiting_.front() == device; });
  waiting_.pop_front();
  d.slot = freeSlots_.back();
  freeSlots_.pop_back();
  pin(d);
  // The next in line may find a core free too.
  wakeFirst();
}

void CoreGate::wakeFirst() {
  if (freeSlots_.empty() || waiting_.empty()) return;
  Device& next = devices_[static_cast<std::size_t>(waiting_.front())];
  // Moved to the free core's CPU before it wakes: left to the OS it may wake
  // on the other CPU, behind the device computing there, while this one idles.
  next.slot = freeSlots_.back();
  pin(next);
  next.slot = -1;
  next.turn.notify_one();
}

void CoreGate::pin(Device& d) {
  if (cpuOfSlot_.empty() || !d.attached) return;
  const int cpu = cpuOfSlot_[static_cast<std::size_t>(d.slot)];
  if (d.pinnedCpu == cpu) return;
  setAffinity(d.thread, {cpu});
  d.pinnedCpu = cpu;
}

void CoreGate::unpin(Device& d) {
  if (cpuOfSlot_.empty() || !d.attached || d.pinnedCpu < 0) return;
  setAffinity(d.thread, allCpus_);
  d.pinnedCpu = -1;
}

void CoreGate::giveBack(Device& d) {
  freeSlots_.push_back(d.slot);
  d.slot = -1;
}

void CoreGate::release(int device) {
  if (cores_ == 0) return;
  std::lock_guard lock(mutex_);
  Device& d = devices_.at(static_cast<std::size_t>(device));
  if (d.slot < 0) return;
  giveBack(d);
  // It is about to block until a message or a collective wakes it: let that
  // wake it on whichever CPU is idle then, not behind the device that got
  // its core.
  unpin(d);
  wakeFirst();
}

void CoreGate::takeTurn(int device) {
  if (cores_ == 0) return;
  std::unique_lock lock(mutex_);
  Device& d = devices_.at(static_cast<std::size_t>(device));
  if (d.slot < 0 || waiting_.empty()) return;
  giveBack(d);
  wakeFirst();
  waitForCore(lock, device);
}

bool CoreGate::holds(int device) {
  if (cores_ == 0) return false;
  std::lock_guard lock(mutex_);
  return devices_.at(static_cast<std::size_t>(device)).slot >= 0;
}

CoreGate::Hold::Hold(CoreGate* gate, int device) : gate_(gate), device_(device) {
  if (!gate_) return;
  gate_->attachThread(device_);
  try {
    gate_->acquire(device_);
  } catch (...) {
    gate_->detachThread(device_);  // no pinning of a thread about to end
    throw;
  }
}

CoreGate::Hold::~Hold() {
  if (!gate_) return;
  gate_->release(device_);
  gate_->detachThread(device_);
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
