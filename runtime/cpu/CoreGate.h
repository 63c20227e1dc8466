// cpu::CoreGate — the host's cores, shared by the cpu backend's device threads.
//
// A virtual cluster may have more devices than the machine has cores (the main
// example runs 4 devices on 2). Left to the OS, four threads computing on two
// cores are time-sliced: every kernel runs at a fraction of a core, with a
// context switch every few milliseconds, and the device a pipeline waits for
// can sit runnable behind devices that nobody waits for. The gate instead lets
// at most `cores` devices compute at once: a device takes a core for each
// compute instruction (RUN, UPDATE) and gives it back when the instruction ends
// or while it blocks on communication inside one; waiting devices get the cores
// in the order they asked. The simulator schedules compute by the same rule
// (SimulatorOptions::hostCores), so its prediction for a shared host is the
// schedule the gate runs.
#pragma once

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

  /// Holds a core for a scope (a compute instruction).
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
  bool holds(int device);

  const int cores_;
  std::mutex mutex_;
  std::condition_variable turn_;
  int free_;
  std::deque<int> waiting_;  // devices, in the order they asked
  std::vector<char> held_;   // per device
};

}  // namespace meshflow::runtime::cpu
