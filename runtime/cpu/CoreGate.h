// cpu::CoreGate — the host's cores, shared by the devices that compute on them.
//
// A virtual cluster may have more devices than the machine has cores (the main
// example runs 4 devices on 2). Left to the OS, four threads computing on two
// cores are time-sliced: every kernel runs at a fraction of a core, with a
// context switch every few milliseconds, and the device a pipeline waits for
// can sit runnable behind devices that nobody waits for — for milliseconds
// after its message arrived. The gate instead keeps at most `cores` devices
// runnable: a device holds a core while it runs (LocalCluster::run takes one
// for it) and gives it up only while it waits — blocked in communication, or
// in line for a core. Before each compute instruction (RUN, UPDATE) the
// executor takes its turn: if other devices are waiting for a core, it goes
// behind them. Waiting devices get the cores first come, first served. The
// simulator schedules compute by the same rule (SimulatorOptions::hostCores),
// so its prediction for a shared host is the schedule the gate runs.
//
// The devices are the cpu backend's threads of one process, or the processes
// of an mpi job that share a node (one device each): the gate's state is then
// in shared memory (attach()), its lock and wake-ups process-shared, and a
// wait for a core ends with an error after a timeout, or takes back the core
// of a process that died holding it — a killed rank never leaves the others
// waiting.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>

namespace meshflow::runtime::cpu {

class CoreGate {
 public:
  /// The gate of `devices` threads of this process. `cores` <= 0, or at
  /// least `devices`: as many cores as devices (acquire never waits).
  CoreGate(int cores, int devices);
  ~CoreGate();
  CoreGate(const CoreGate&) = delete;
  CoreGate& operator=(const CoreGate&) = delete;

  /// Bytes of shared memory a gate of `slots` devices needs.
  static std::size_t sharedBytes(int slots);
  /// The gate of a node's processes, in `memory` (sharedBytes(slots) bytes,
  /// shared by them, zeroed): exactly one of them calls it with `create`
  /// before the others attach. This process's device `device` is slot
  /// `slot`; it is the only device this process may pass. A wait for a core
  /// longer than `timeout` throws std::runtime_error.
  static std::unique_ptr<CoreGate> attach(void* memory, bool create, int cores, int slots,
                                          int device, int slot, std::chrono::milliseconds timeout);

  /// The cores shared, 0 when unlimited.
  int cores() const;
  /// A shared gate: how long a wait for a core may last (0: without limit).
  void setWaitLimit(std::chrono::milliseconds limit) { timeout_ = limit; }

  /// Before the devices start (none holds or waits for a core): devices 0, 1,
  /// ... get the cores and the others wait in line in device order, as the
  /// simulator breaks ties. Each device's next acquire then takes the place it
  /// was given. Left to the threads' wake-up order, a device with nothing to do
  /// until a message comes could take a core from one that could compute (the
  /// tiny GPT's first stage started up to 0.9 ms late, measured, and its chain
  /// is the step's critical path). Threads of one process only.
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
    /// Throws when a shared gate's wait for the core times out.
    ~Yield() noexcept(false);
    Yield(const Yield&) = delete;
    Yield& operator=(const Yield&) = delete;

   private:
    CoreGate* gate_;
    int device_;
    int exceptions_;
    bool held_ = false;
  };

 private:
  struct State;
  class Lock;
  CoreGate() = default;

  int slot(int device) const;
  bool holds(int device);
  // With the lock held: `slot` gets in line, waits for its turn, then takes a core.
  void waitForCore(Lock& lock, int slot);
  // With the lock held: `slot`, in line, waits for its turn, then takes a core.
  void awaitTurn(Lock& lock, int slot);
  // With the lock held: if a core is free, wakes the first device in line —
  // only that one. Waking every waiter to find out whose turn it was cost
  // each handoff of a core ~65 us of core time with 4 devices on 2 cores
  // (~20 us now, measured by bench_runtime as the core handoff).
  void wakeFirst();
  // With the lock held (shared gates): frees the cores of processes that died
  // holding one, and drops dead processes from the line.
  void reclaimFromTheDead();

  State* state_ = nullptr;
  std::unique_ptr<std::byte[]> owned_;  // the state, for a gate of this process
  std::map<int, int> slotOf_;           // device -> slot, for a shared gate
  std::chrono::milliseconds timeout_{0};  // 0: wait without limit
};

}  // namespace meshflow::runtime::cpu
