#include "runtime/cpu/DeviceThreads.h"

namespace meshflow::runtime::cpu {

DeviceThreads::DeviceThreads(int devices) : devices_(devices) {}

DeviceThreads::~DeviceThreads() { stop(); }

void DeviceThreads::start() {
  try {
    for (int device = 0; device < devices_; ++device) threads_.emplace_back([this, device] { loop(device); });
  } catch (...) {
    stop();
    // A later run may try again: its threads must not find the stop meant for these.
    std::lock_guard lock(mutex_);
    stopping_ = false;
    throw;
  }
}

void DeviceThreads::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  begun_.notify_all();
  for (auto& thread : threads_) thread.join();
  threads_.clear();
}

void DeviceThreads::run(const std::function<void(int device)>& task) {
  if (threads_.empty()) start();
  std::unique_lock lock(mutex_);
  task_ = &task;
  running_ = devices_;
  ++generation_;
  begun_.notify_all();
  finished_.wait(lock, [&] { return running_ == 0; });
  task_ = nullptr;
}

void DeviceThreads::loop(int device) {
  // The runs this thread has served. Threads are started before the first run
  // (and only then), so a thread that reaches here after that run began still
  // serves it.
  std::uint64_t done = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    begun_.wait(lock, [&] { return stopping_ || generation_ != done; });
    if (stopping_) return;
    done = generation_;
    const auto* task = task_;
    lock.unlock();
    (*task)(device);
    lock.lock();
    if (--running_ == 0) finished_.notify_all();
  }
}

}  // namespace meshflow::runtime::cpu
