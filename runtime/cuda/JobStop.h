// Whether a job has stopped (another process failed), as a GPU process's
// NCCL waits ask it: the thread that runs the process's device may poll the
// job's transport (an MPI poll: MPI is called from that thread only), while
// NCCL's sending threads read what that thread saw last. Once seen, a stop
// stays seen.
#pragma once

#include <atomic>
#include <functional>
#include <thread>
#include <utility>

namespace meshflow::runtime::cuda {

class JobStop {
 public:
  /// `poll`: asks the job's transport, without waiting (null: never stops).
  explicit JobStop(std::function<bool()> poll) : poll_(std::move(poll)) {}

  /// From now on, calls on `thread` poll; calls on other threads only read.
  void pollOn(std::thread::id thread) { pollThread_.store(thread); }

  bool operator()() {
    if (!seen_.load() && poll_ && std::this_thread::get_id() == pollThread_.load() && poll_())
      seen_.store(true);
    return seen_.load();
  }

 private:
  std::function<bool()> poll_;
  std::atomic<std::thread::id> pollThread_{};
  std::atomic<bool> seen_{false};
};

}  // namespace meshflow::runtime::cuda
