// The host cores shared by processes (cpu/CoreGate.h's attach, as the mpi
// backend's ranks of one node share them): never more computing at once than
// there are cores, a process that dies holding a core gives it back, and a
// wait for a core that a stopped process keeps ends with an error naming it.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "runtime/cpu/CoreGate.h"

using meshflow::runtime::cpu::CoreGate;
using namespace std::chrono_literals;

namespace {

// Anonymous memory that forked children share with this process: the gate,
// then two counters.
class SharedMemory {
 public:
  explicit SharedMemory(int slots) : gateBytes_(CoreGate::sharedBytes(slots)) {
    bytes_ = gateBytes_ + 2 * sizeof(std::atomic<int>);
    memory_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(memory_ != MAP_FAILED);
    std::memset(memory_, 0, bytes_);
    new (counter(0)) std::atomic<int>(0);
    new (counter(1)) std::atomic<int>(0);
  }
  ~SharedMemory() { munmap(memory_, bytes_); }
  void* gate() const { return memory_; }
  std::atomic<int>* counter(int i) const {
    return reinterpret_cast<std::atomic<int>*>(static_cast<char*>(memory_) + gateBytes_) + i;
  }

 private:
  std::size_t gateBytes_, bytes_;
  void* memory_;
};

// Runs `body` in a child process that ends with its result as exit code.
template <class Body>
pid_t forkRunning(Body body) {
  pid_t pid = fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = body();
    } catch (...) {
    }
    _exit(code);
  }
  REQUIRE(pid > 0);
  return pid;
}

// A child process that takes the one core of a 2-slot gate in `shared` as
// `device` (slot 1), says so in counter 0, then exits holding it, or, when
// `stay`, keeps it until it is killed.
pid_t childHoldingTheCore(const SharedMemory& shared, int device, bool stay) {
  return forkRunning([&shared, device, stay] {
    auto theirs = CoreGate::attach(shared.gate(), false, 1, 2, device, 1, 10s);
    theirs->acquire(device);
    *shared.counter(0) = 1;
    if (stay) pause();
    return 0;
  });
}

int exitCode(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("processes sharing a gate compute at most `cores` at once", "[runtime][cores]") {
  constexpr int kProcesses = 4, kCores = 2;
  SharedMemory shared(kProcesses);
  auto creator = CoreGate::attach(shared.gate(), true, kCores, kProcesses, 0, 0, 10s);
  CHECK(creator->cores() == kCores);
  std::atomic<int>& inside = *shared.counter(0);
  std::atomic<int>& most = *shared.counter(1);
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p)
    children.push_back(forkRunning([&, p] {
      auto gate = CoreGate::attach(shared.gate(), false, kCores, kProcesses, 10 + p, p, 10s);
      for (int i = 0; i < 5; ++i) {
        CoreGate::Hold core(gate.get(), 10 + p);
        int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        std::this_thread::sleep_for(3ms);
        --inside;
      }
      return 0;
    }));
  for (pid_t child : children) CHECK(exitCode(child) == 0);
  CHECK(most.load() == kCores);
}

TEST_CASE("a process that dies holding a core gives it back", "[runtime][cores]") {
  SharedMemory shared(2);
  auto gate = CoreGate::attach(shared.gate(), true, 1, 2, 0, 0, 10s);
  std::atomic<int>& holding = *shared.counter(0);
  pid_t child = childHoldingTheCore(shared, 1, false);  // exits holding the core
  CHECK(exitCode(child) == 0);
  REQUIRE(holding.load() == 1);
  auto start = std::chrono::steady_clock::now();
  gate->acquire(0);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  gate->release(0);
}

TEST_CASE("a wait for a core that a stopped process keeps ends with an error", "[runtime][cores]") {
  SharedMemory shared(2);
  auto gate = CoreGate::attach(shared.gate(), true, 1, 2, 0, 0, 300ms);
  std::atomic<int>& holding = *shared.counter(0);
  pid_t child = childHoldingTheCore(shared, 3, true);  // holds the core until killed
  while (holding.load() == 0) std::this_thread::sleep_for(1ms);
  CHECK_THROWS_WITH(gate->acquire(0),
                    "device 0 waited 300 ms for a host core; held by device 3 (the node's ranks share 1 core)");
  kill(child, SIGKILL);
  exitCode(child);
  // The dead holder's core comes back.
  gate->acquire(0);
  gate->release(0);
}
