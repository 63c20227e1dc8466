// The cpu backend's device threads (cpu/DeviceThreads.h): every device's task
// runs on its own thread, the same thread run after run, all at once, and
// run() returns only when every task has.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/cpu/DeviceThreads.h"

using meshflow::runtime::cpu::DeviceThreads;
using namespace std::chrono_literals;

TEST_CASE("each device keeps its own thread from run to run", "[runtime][threads]") {
  DeviceThreads threads(3);
  std::vector<std::thread::id> first(3), again(3);
  threads.run([&](int device) { first[static_cast<std::size_t>(device)] = std::this_thread::get_id(); });
  threads.run([&](int device) { again[static_cast<std::size_t>(device)] = std::this_thread::get_id(); });
  CHECK(first == again);
  std::set<std::thread::id> distinct(first.begin(), first.end());
  CHECK(distinct.size() == 3);
  CHECK(distinct.count(std::this_thread::get_id()) == 0);
}

TEST_CASE("the tasks of a run run at once, and run returns when all have", "[runtime][threads]") {
  DeviceThreads threads(4);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> arrived{0};
    std::atomic<int> returned{0};
    threads.run([&](int) {
      // Every task waits for all the others: a run that started them one by one would hang here.
      ++arrived;
      while (arrived.load() < 4) std::this_thread::yield();
      std::this_thread::sleep_for(1ms);
      ++returned;
    });
    INFO("round " << round);
    REQUIRE(returned.load() == 4);
  }
}

TEST_CASE("device threads stop when destroyed, also without a run", "[runtime][threads]") {
  { DeviceThreads unused(2); }
  DeviceThreads threads(2);
  int runs = 0;
  std::mutex mutex;
  threads.run([&](int) {
    std::lock_guard lock(mutex);
    ++runs;
  });
  CHECK(runs == 2);
}
