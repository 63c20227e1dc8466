// Internal to solveSharding: a second engine racing the fast path on its own
// thread under the same time budget.
//
// The engine (CBC) gets a thread only once the fast path has had its head
// start (poll() is called by the fast path as it goes, and starts the thread
// when the head start is over) or gives up (startNow()): what the fast path
// closes at once never pays for a thread. Either side can stop the other: the
// caller by stop() once its own answer is proven, the engine by setting
// proved() (which the fast path polls) when it proves first. Who finishes
// first changes only the time taken, not the answer: the caller picks the
// answer by a rule that does not depend on the order (ShardingSolver.cpp,
// docs/sharding.md "How the engines race").
#pragma once

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <thread>

namespace meshflow::passes::sharding {

class RacingEngine {
 public:
  /// The engine's work: it should return soon once `stop` is set, and returns
  /// whether it proved its answer optimal.
  using Task = std::function<bool(const std::atomic<bool>& stop)>;

  /// The engine may start `headStartSeconds` from now; nothing runs yet.
  RacingEngine(Task task, double headStartSeconds);
  /// Stops the engine and waits for it: no thread outlives the solve.
  ~RacingEngine();
  RacingEngine(const RacingEngine&) = delete;
  RacingEngine& operator=(const RacingEngine&) = delete;

  /// Starts the engine when the head start is over (unless stopped); returns
  /// whether the engine has proved its answer. Called by the fast path.
  bool poll();
  /// Starts the engine now (unless stopped): the fast path gave up.
  void startNow();
  /// Asks a running engine to stop; one not started never starts.
  void stop();
  /// Waits for the engine to end and rethrows what its task threw; afterwards
  /// started() says whether it ran.
  void finish();
  bool started() const { return thread_.joinable() || ran_; }
  /// Set once the engine has finished with a proof.
  bool proved() const { return proved_.load(std::memory_order_relaxed); }

 private:
  Task task_;
  std::chrono::steady_clock::time_point startAt_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> proved_{false};
  bool ran_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace meshflow::passes::sharding
