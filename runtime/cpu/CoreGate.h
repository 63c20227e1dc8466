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

  /// Before the devices start (none holds or waits for a core): devices 0, 1,
  /// ... get the cores and the others wait in line in device order, as the
  /// simulator breaks ties. Each device's next acquire then takes the place it
  /// was given. Left to the threads' wake-up order, a device with nothing to do
  /// until a message comes could take a core from one that could compute (the
  /// tiny GPT's first stage started up to 0.9 ms late, measured, and its chain
  /// is the step's critical path).
  void lineUp();
  /// Blocks until `device` holds a core; first come, first served. `device`
  /// must not hold one already (unless lineUp gave it one).
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
  bool holds(int device);
  // With the lock held: `device` gets in line, waits for its turn, then takes a core.
  void waitForCore(std::unique_lock<std::mutex>& lock, int device);
  // With the lock held: `device`, in line, waits for its turn, then takes a core.
  void awaitTurn(std::unique_lock<std::mutex>& lock, int device);
  // With the lock held: if a core is free, wakes the first device in line —
  // only that one. Waking every waiter to find out whose turn it was cost
  // each handoff of a core ~65 us of core time with 4 devices on 2 cores
  // (~20 us now, measured by bench_runtime as the core handoff).
  void wakeFirst();

  const int cores_;
  std::mutex mutex_;
  int free_;
  std::vector<std::condition_variable> turns_;  // per device: its turn came
  std::deque<int> waiting_;  // devices, in the order they asked
  std::vector<char> held_;   // per device
  std::vector<char> lined_;  // per device: placed by lineUp, not yet taken up by acquire
};

}  // namespace meshflow::runtime::cpu
