#include "passes/ShardingRace.h"

#include <utility>

namespace meshflow::passes::sharding {

RacingEngine::RacingEngine(Task task, double headStartSeconds)
    : task_(std::move(task)),
      startAt_(std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(headStartSeconds))) {}

RacingEngine::~RacingEngine() {
  stop();
  if (thread_.joinable()) thread_.join();
}

bool RacingEngine::poll() {
  if (!started() && std::chrono::steady_clock::now() >= startAt_) startNow();
  return proved();
}

void RacingEngine::startNow() {
  if (started() || stop_.load()) return;
  thread_ = std::thread([this] {
    try {
      proved_.store(task_(stop_));
    } catch (...) {
      error_ = std::current_exception();
    }
  });
}

void RacingEngine::stop() { stop_.store(true); }

void RacingEngine::finish() {
  if (thread_.joinable()) {
    thread_.join();
    ran_ = true;
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace meshflow::passes::sharding
