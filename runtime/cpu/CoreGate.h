// cpu::CoreGate — the host's cores, shared by the cpu backend's device threads.
//
// A virtual cluster may have more devices than the machine has cores (the main
// example runs 4 devices on 2). Left to the OS, four threads computing on two
// cores are time-sliced: every kernel runs at a fraction of a core, with a
// context switch every few milliseconds, and the device a pipeline waits for
// can sit runnable behind devices that nobody waits for — for milliseconds
// after its message arrived. The gate instead keeps at most `cores` device
// threads runnable: a device thread holds a core while it runs
// (LocalCluster::run takes one for it) and gives it up only while it waits —
// blocked in communication, or in line for a core. Before each compute
// instruction (RUN, UPDATE) the executor takes its turn: if other devices are
// waiting for a core, it goes behind them. Waiting devices get the cores first
// come, first served. The simulator schedules compute by the same rule
// (SimulatorOptions::hostCores), so its prediction for a shared host is the
// schedule the gate runs.
//
// Each core is one of the process's CPUs, and the OS is told so: a device
// thread holding core k is pinned to CPU k; a device handed a core is moved
// to its CPU before it is woken; a device that gives its core up to wait for
// a message is unpinned, so that the message wakes it on whichever CPU is
// idle. Left to place a woken thread itself, the OS often put it on the other
// CPU, behind the device computing there, while the core it was handed sat
// idle: a handoff cost 65 us of core time with 4 devices on 2 cores, 7 us
// pinned (and the tiny GPT's step ~10% less). Without enough CPUs for the
// cores (a restricted affinity mask), nothing is pinned.
#pragma once

#include <pthread.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <vector>

namespace meshflow::runtime::cpu {

class CoreGate {
 public:
  /// `cores` <= 0: as many cores as devices (acquire never waits).
  CoreGate(int cores, int devices);

  /// The cores shared, 0 when unlimited.
  int cores() const { return cores_; }

  /// Blocks until `device` holds a core; first come, first served. `device`
  /// must not hold one already.
  void acquire(int device);
  /// Gives `device`'s core back; nothing if it holds none.
  void release(int device);
  /// Before a computation: if devices are waiting for a core, `device` (which
  /// holds one) gives its core to the first and waits behind them; otherwise
  /// it keeps it. Nothing if it holds none.
  void takeTurn(int device);

  /// Holds a core for a scope (a device thread's run).
  class Hold {
   public:
    Hold(CoreGate* gate, int device);
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

   private:
    CoreGate* gate_;
    int device_;
  };

  /// Gives `device`'s core up for a scope, if it holds one (a blocking wait),
  /// and takes one again at its end — unless the scope ends by an exception:
  /// a failing device needs no core to unwind.
  class Yield {
   public:
    Yield(CoreGate* gate, int device);
    ~Yield();
    Yield(const Yield&) = delete;
    Yield& operator=(const Yield&) = delete;

   private:
    CoreGate* gate_;
    int device_;
    int exceptions_;
    bool held_ = false;
  };

 private:
  struct Device {
    std::condition_variable turn;  // its turn came
    int slot = -1;                 // the core it holds, -1: none
    bool attached = false;         // its thread is known (between Hold and ~Hold)
    pthread_t thread{};
    int pinnedCpu = -1;
  };

  // The calling thread runs `device` (for pinning it to its core's CPU).
  void attachThread(int device);
  void detachThread(int device);
  bool holds(int device);
  // With the lock held: `device` waits for its turn, then takes a core.
  void waitForCore(std::unique_lock<std::mutex>& lock, int device);
  // With the lock held: if a core is free, wakes the first device in line —
  // only that one: waking every waiter to find it is not their turn cost
  // each handoff of a core tens of microseconds on a two-core machine.
  void wakeFirst();
  void giveBack(Device& d);
  // Keeps `d`'s thread on the CPU of the core slot it holds or is handed.
  void pin(Device& d);
  // Lets `d`'s thread run on any CPU again.
  void unpin(Device& d);

  const int cores_;
  std::mutex mutex_;
  std::vector<int> freeSlots_;        // core slots, the next to hand out last
  std::vector<int> cpuOfSlot_;        // empty: threads are not pinned
  std::vector<int> allCpus_;          // the process's CPUs
  std::deque<int> waiting_;           // devices, in the order they asked
  std::vector<Device> devices_;
};

}  // namespace meshflow::runtime::cpu
