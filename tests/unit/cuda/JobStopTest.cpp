// A GPU process's view of the job's stop (runtime/cuda/JobStop.h): only the
// device's thread polls the job's transport; NCCL's sending threads see what
// it saw; a stop once seen stays seen.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "runtime/cuda/JobStop.h"

using meshflow::runtime::cuda::JobStop;

TEST_CASE("only the device's thread polls the job's transport", "[cuda][nccl][stop]") {
  std::atomic<int> polls{0};
  std::atomic<bool> aborted{false};
  JobStop stop([&] {
    ++polls;
    return aborted.load();
  });
  CHECK_FALSE(stop());  // no thread named yet: nothing polls
  CHECK(polls == 0);
  stop.pollOn(std::this_thread::get_id());
  CHECK_FALSE(stop());
  CHECK(polls == 1);

  aborted = true;
  bool seenElsewhere = true;
  std::thread sender([&] { seenElsewhere = stop(); });
  sender.join();
  CHECK_FALSE(seenElsewhere);  // another thread reads what the device's thread saw
  CHECK(polls == 1);

  CHECK(stop());
  std::thread later([&] { seenElsewhere = stop(); });
  later.join();
  CHECK(seenElsewhere);

  aborted = false;  // a stop stays seen, without polling again
  CHECK(stop());
  CHECK(polls == 2);
}

TEST_CASE("a job without a stop signal never stops", "[cuda][nccl][stop]") {
  JobStop stop(nullptr);
  stop.pollOn(std::this_thread::get_id());
  CHECK_FALSE(stop());
}
