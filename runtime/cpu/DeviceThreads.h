// cpu::DeviceThreads — one thread per virtual device, for the life of a cluster.
//
// LocalCluster::run used to start a thread per device for every call — once
// per training step — and join them at its end. Starting them cost a tenth of
// a millisecond or more of every step before the first device computed
// (0.2–0.3 ms of the tiny GPT's ~10 ms step, measured), and each step's
// threads started with none of the state a device thread builds up (its
// allocator cache, OpenBLAS's buffers). These threads are started on the
// first run and wait between runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace meshflow::runtime::cpu {

class DeviceThreads {
 public:
  explicit DeviceThreads(int devices);
  /// Stops and joins the threads (after any run has returned).
  ~DeviceThreads();
  DeviceThreads(const DeviceThreads&) = delete;
  DeviceThreads& operator=(const DeviceThreads&) = delete;

  /// Runs task(device) on every device's thread at once and returns when every
  /// one has returned. `task` must not throw. One run at a time. The first run
  /// starts the threads: if one cannot be started, those started are stopped
  /// and the std::system_error is rethrown.
  void run(const std::function<void(int device)>& task);

 private:
  void start();
  void stop() noexcept;
  void loop(int device);

  const int devices_;
  std::mutex mutex_;
  std::condition_variable begun_;    // a run began, or stop
  std::condition_variable finished_; // the last task of a run returned
  const std::function<void(int)>* task_ = nullptr;
  std::uint64_t generation_ = 0;     // runs begun
  int running_ = 0;                  // tasks of this run not yet returned
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace meshflow::runtime::cpu
