// A job of "processes" that are threads of this test: the controller/worker
// protocol of runtime/distributed/ run without MPI, each rank with its own
// trainer, over one cpu::LocalCluster's communicators.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "runtime/cpu/LocalCluster.h"
#include "runtime/distributed/ProcessGroup.h"
#include "runtime/distributed/SingleDeviceHost.h"
#include "runtime/distributed/Worker.h"

namespace meshflow::distributed_test {

class ThreadJob {
 public:
  explicit ThreadJob(int ranks, std::chrono::milliseconds timeout = std::chrono::seconds(20))
      : ranks_(ranks), cluster_({ranks, timeout, 0}), sent_(static_cast<std::size_t>(ranks), 0) {}

  int ranks() const { return ranks_; }
  /// The bytes of the control messages `rank` has sent so far.
  std::size_t sentBy(int rank) {
    std::lock_guard lock(mutex_);
    return sent_[static_cast<std::size_t>(rank)];
  }
  runtime::cpu::LocalCluster& cluster() { return cluster_; }

  void send(int from, int to, std::string bytes) {
    std::lock_guard lock(mutex_);
    sent_[static_cast<std::size_t>(from)] += bytes.size();
    boxes_[{from, to}].push_back(std::move(bytes));
    changed_.notify_all();
  }

  std::string recv(int from, int to, std::optional<std::chrono::milliseconds> timeout, bool evenAfterAbort) {
    std::unique_lock lock(mutex_);
    auto ready = [&] { return !boxes_[{from, to}].empty() || (!evenAfterAbort && !abortReason_.empty()); };
    if (timeout) {
      if (!changed_.wait_for(lock, *timeout, ready))
        throw runtime::CommError(runtime::CommError::Kind::Timeout, to, "control message timed out");
    } else {
      changed_.wait(lock, ready);
    }
    auto& box = boxes_[{from, to}];
    if (box.empty()) throw runtime::CommError(runtime::CommError::Kind::Aborted, to, abortReason_);
    std::string bytes = std::move(box.front());
    box.pop_front();
    return bytes;
  }

  void abort(int rank, const std::string& reason) {
    {
      std::lock_guard lock(mutex_);
      if (abortReason_.empty()) abortReason_ = "rank " + std::to_string(rank) + " failed: " + reason;
      changed_.notify_all();
    }
    cluster_.abort(reason);
  }

 private:
  int ranks_;
  runtime::cpu::LocalCluster cluster_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<int, int>, std::deque<std::string>> boxes_;
  std::vector<std::size_t> sent_;  // per rank
  std::string abortReason_;
};

class ThreadProcessGroup final : public runtime::ProcessGroup {
 public:
  ThreadProcessGroup(ThreadJob& job, int rank) : job_(job), rank_(rank) {}
  std::string backend() const override { return "thread"; }
  int rank() const override { return rank_; }
  int size() const override { return job_.ranks(); }
  void send(int peer, std::string bytes) override { job_.send(rank_, peer, std::move(bytes)); }
  std::string recv(int peer, std::optional<std::chrono::milliseconds> timeout, bool evenAfterAbort) override {
    return job_.recv(peer, rank_, timeout, evenAfterAbort);
  }
  void abort(const std::string& reason) override { job_.abort(rank_, reason); }
  std::unique_ptr<runtime::DeviceHost> deviceHost(std::chrono::milliseconds) override {
    return std::make_unique<runtime::SingleDeviceHost>(rank_, job_.cluster().communicator(rank_),
                                                       [this](const std::string& r) { abort(r); });
  }

 private:
  ThreadJob& job_;
  int rank_;
};

/// Runs `controller` as rank 0 and a worker on every other rank; returns the
/// workers' exit codes and what they wrote.
struct WorkerOutcome {
  int code = 0;
  std::string err;
};

inline std::vector<WorkerOutcome> runJob(ThreadJob& job, const std::function<void(runtime::ProcessGroup&)>& controller) {
  std::vector<WorkerOutcome> outcomes(static_cast<std::size_t>(job.ranks()));
  std::vector<std::thread> workers;
  for (int r = 1; r < job.ranks(); ++r)
    workers.emplace_back([&, r] {
      ThreadProcessGroup group(job, r);
      std::ostringstream err;
      outcomes[static_cast<std::size_t>(r)].code = runtime::runWorker(group, err);
      outcomes[static_cast<std::size_t>(r)].err = err.str();
    });
  ThreadProcessGroup group(job, 0);
  try {
    controller(group);
  } catch (...) {
    runtime::releaseWorkers(group, 1, "the test failed");
    for (auto& t : workers) t.join();
    throw;
  }
  runtime::releaseWorkers(group, 0, "");
  for (auto& t : workers) t.join();
  return outcomes;
}

}  // namespace meshflow::distributed_test
