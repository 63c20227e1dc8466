#include "runtime/cpu/CoreGate.h"

#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace meshflow::runtime::cpu {

namespace {

// One device's place at the gate.
struct Slot {
  pthread_cond_t turn;  // signalled when the slot's turn came
  pid_t owner;          // the process of the device (shared gates)
  int device;
  char held;   // holds a core
  char lined;  // placed by lineUp, not yet taken up by acquire
};

void check(int code, const char* call) {
  if (code != 0)
    throw std::runtime_error(fmt::format("the host cores' gate: {} failed (error {})", call, code));
}

timespec monotonicIn(std::chrono::milliseconds from) {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  auto nanos = static_cast<long long>(now.tv_nsec) +
               std::chrono::duration_cast<std::chrono::nanoseconds>(from).count();
  now.tv_sec += static_cast<time_t>(nanos / 1'000'000'000);
  now.tv_nsec = static_cast<long>(nanos % 1'000'000'000);
  return now;
}

bool processGone(pid_t pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace

// The gate's state: plain data, so that it can live in memory the processes
// of a node share. The slots follow it, then the line of waiting slots, a
// ring of `slots` entries (a slot waits at most once).
struct alignas(alignof(Slot) > alignof(pthread_mutex_t) ? alignof(Slot) : alignof(pthread_mutex_t))
    CoreGate::State {
  pthread_mutex_t mutex;
  int cores;
  int slots;
  int free;
  int head;     // the ring's first entry
  int waiting;  // entries in the ring
  bool shared;

  Slot* slot() { return reinterpret_cast<Slot*>(this + 1); }
  Slot& slot(int s) { return slot()[s]; }
  int* ring() { return reinterpret_cast<int*>(slot() + slots); }

  static std::size_t bytes(int slots) {
    auto n = static_cast<std::size_t>(slots);
    return sizeof(State) + n * sizeof(Slot) + n * sizeof(int);
  }

  void init(int cores_, int slots_, bool shared_) {
    cores = cores_;
    slots = slots_;
    free = cores_;
    head = waiting = 0;
    shared = shared_;
    pthread_mutexattr_t mutexAttributes;
    pthread_mutexattr_init(&mutexAttributes);
    pthread_condattr_t condAttributes;
    pthread_condattr_init(&condAttributes);
    pthread_condattr_setclock(&condAttributes, CLOCK_MONOTONIC);
    if (shared) {
      pthread_mutexattr_setpshared(&mutexAttributes, PTHREAD_PROCESS_SHARED);
      pthread_mutexattr_setrobust(&mutexAttributes, PTHREAD_MUTEX_ROBUST);
      pthread_condattr_setpshared(&condAttributes, PTHREAD_PROCESS_SHARED);
    }
    check(pthread_mutex_init(&mutex, &mutexAttributes), "pthread_mutex_init");
    for (int s = 0; s < slots; ++s) {
      Slot& it = slot(s);
      check(pthread_cond_init(&it.turn, &condAttributes), "pthread_cond_init");
      it.owner = 0;
      it.device = s;
      it.held = it.lined = 0;
    }
    pthread_condattr_destroy(&condAttributes);
    pthread_mutexattr_destroy(&mutexAttributes);
  }

  void destroy() {
    for (int s = 0; s < slots; ++s) pthread_cond_destroy(&slot(s).turn);
    pthread_mutex_destroy(&mutex);
  }

  int front() { return ring()[head]; }
  void push(int s) { ring()[(head + waiting++) % slots] = s; }
  void popFront() {
    head = (head + 1) % slots;
    --waiting;
  }
  // Keeps in line only the slots `keep` says yes to, in their order.
  template <class Keep>
  void filterLine(Keep keep) {
    std::vector<int> kept;
    for (int i = 0; i < waiting; ++i)
      if (int s = ring()[(head + i) % slots]; keep(s)) kept.push_back(s);
    head = 0;
    waiting = 0;
    for (int s : kept) push(s);
  }
};

// The gate's lock. In a shared gate the mutex is robust: a process that died
// holding it passes it on to the next, which makes it consistent again (the
// state is changed only under the lock, and each change is whole before any
// wait).
class CoreGate::Lock {
 public:
  explicit Lock(State& state) : state_(state) {
    int code = pthread_mutex_lock(&state_.mutex);
    if (code == EOWNERDEAD) code = pthread_mutex_consistent(&state_.mutex);
    check(code, "pthread_mutex_lock");
  }
  ~Lock() { pthread_mutex_unlock(&state_.mutex); }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;

  /// Waits for slot `s`'s turn to be signalled, at most until `deadline`
  /// when one is given.
  void wait(int s, const timespec* deadline) {
    pthread_cond_t* turn = &state_.slot(s).turn;
    int code = deadline ? pthread_cond_timedwait(turn, &state_.mutex, deadline)
                        : pthread_cond_wait(turn, &state_.mutex);
    if (code == EOWNERDEAD) pthread_mutex_consistent(&state_.mutex);
  }

 private:
  State& state_;
};

CoreGate::CoreGate(int cores, int devices) {
  int slots = std::max(devices, 1);
  owned_ = std::make_unique<std::byte[]>(State::bytes(slots) + alignof(State));
  void* memory = owned_.get();
  std::size_t space = State::bytes(slots) + alignof(State);
  state_ = static_cast<State*>(std::align(alignof(State), State::bytes(slots), memory, space));
  state_->init(cores > 0 && cores < devices ? cores : 0, slots, false);
}

std::size_t CoreGate::sharedBytes(int slots) { return State::bytes(std::max(slots, 1)); }

std::unique_ptr<CoreGate> CoreGate::attach(void* memory, bool create, int cores, int slots,
                                           int device, int slot, std::chrono::milliseconds timeout) {
  if (reinterpret_cast<std::uintptr_t>(memory) % alignof(State) != 0)
    throw std::invalid_argument("the host cores' shared memory is not aligned");
  if (slot < 0 || slot >= slots)
    throw std::invalid_argument(fmt::format("host core slot {} of {}", slot, slots));
  auto* state = static_cast<State*>(memory);
  if (create) state->init(cores > 0 && cores < slots ? cores : 0, slots, true);
  std::unique_ptr<CoreGate> gate(new CoreGate());
  gate->state_ = state;
  gate->slotOf_[device] = slot;
  gate->timeout_ = timeout;
  {
    Lock lock(*state);
    state->slot(slot).owner = getpid();
    state->slot(slot).device = device;
  }
  return gate;
}

CoreGate::~CoreGate() {
  if (owned_) state_->destroy();
}

int CoreGate::cores() const { return state_->cores; }

int CoreGate::slot(int device) const {
  if (slotOf_.empty()) {
    if (device < 0 || device >= state_->slots)
      throw std::out_of_range(fmt::format("device {} at a gate of {} devices", device, state_->slots));
    return device;
  }
  auto it = slotOf_.find(device);
  if (it == slotOf_.end())
    throw std::out_of_range(fmt::format("device {} does not run in this process", device));
  return it->second;
}

void CoreGate::lineUp() {
  if (state_->cores == 0) return;
  if (state_->shared) throw std::logic_error("the processes of a node do not line up for the cores");
  Lock lock(*state_);
  if (state_->free != state_->cores || state_->waiting != 0)
    throw std::logic_error("devices can line up for the cores only while none holds or waits for one");
  for (int s = 0; s < state_->slots; ++s) {
    state_->slot(s).lined = 1;
    if (state_->free > 0) {
      state_->slot(s).held = 1;
      --state_->free;
    } else {
      state_->push(s);
    }
  }
}

void CoreGate::acquire(int device) {
  if (state_->cores == 0) return;
  int s = slot(device);
  Lock lock(*state_);
  Slot& it = state_->slot(s);
  if (std::exchange(it.lined, 0)) {
    if (!it.held) awaitTurn(lock, s);  // in line already
    return;
  }
  if (it.held) throw std::logic_error(fmt::format("device {} asked for a second core", device));
  waitForCore(lock, s);
}

void CoreGate::waitForCore(Lock& lock, int s) {
  state_->push(s);
  awaitTurn(lock, s);
}

void CoreGate::awaitTurn(Lock& lock, int s) {
  auto ready = [&] { return state_->free > 0 && state_->front() == s; };
  if (!state_->shared) {
    while (!ready()) lock.wait(s, nullptr);
  } else {
    // A shared gate looks every 20 ms for processes that died holding a core
    // (a killed rank), and gives up after the timeout (a stopped one).
    auto start = std::chrono::steady_clock::now();
    while (!ready()) {
      timespec slice = monotonicIn(std::chrono::milliseconds(20));
      lock.wait(s, &slice);
      if (ready()) break;
      reclaimFromTheDead();
      if (timeout_.count() > 0 && std::chrono::steady_clock::now() - start > timeout_) {
        state_->filterLine([&](int other) { return other != s; });
        std::vector<int> holders;
        for (int other = 0; other < state_->slots; ++other)
          if (state_->slot(other).held) holders.push_back(state_->slot(other).device);
        throw std::runtime_error(fmt::format(
            "device {} waited {} ms for a host core; held by device{} {} (the node's ranks share "
            "{} core{})",
            state_->slot(s).device, timeout_.count(), holders.size() == 1 ? "" : "s",
            fmt::join(holders, ", "), state_->cores, state_->cores == 1 ? "" : "s"));
      }
    }
  }
  state_->popFront();
  --state_->free;
  state_->slot(s).held = 1;
  // The next in line may find a core free too.
  wakeFirst();
}

void CoreGate::wakeFirst() {
  if (state_->free > 0 && state_->waiting > 0)
    pthread_cond_signal(&state_->slot(state_->front()).turn);
}

void CoreGate::reclaimFromTheDead() {
  for (int s = 0; s < state_->slots; ++s) {
    Slot& it = state_->slot(s);
    if (it.held && processGone(it.owner)) {
      it.held = 0;
      ++state_->free;
    }
  }
  state_->filterLine([&](int s) { return !processGone(state_->slot(s).owner); });
  wakeFirst();
}

void CoreGate::release(int device) {
  if (state_->cores == 0) return;
  int s = slot(device);
  Lock lock(*state_);
  char& held = state_->slot(s).held;
  if (!held) return;
  held = 0;
  ++state_->free;
  wakeFirst();
}

void CoreGate::takeTurn(int device) {
  if (state_->cores == 0) return;
  int s = slot(device);
  Lock lock(*state_);
  char& held = state_->slot(s).held;
  if (!held || state_->waiting == 0) return;
  held = 0;
  ++state_->free;
  wakeFirst();
  waitForCore(lock, s);
}

bool CoreGate::holds(int device) {
  if (state_->cores == 0) return false;
  int s = slot(device);
  Lock lock(*state_);
  return state_->slot(s).held != 0;
}

CoreGate::Hold::Hold(CoreGate* gate, int device) : gate_(gate), device_(device) {
  if (gate_) gate_->acquire(device_);
}

CoreGate::Hold::~Hold() {
  if (gate_) gate_->release(device_);
}

CoreGate::Yield::Yield(CoreGate* gate, int device)
    : gate_(gate), device_(device), exceptions_(std::uncaught_exceptions()) {
  if (gate_ && gate_->holds(device_)) {
    held_ = true;
    gate_->release(device_);
  }
}

CoreGate::Yield::~Yield() noexcept(false) {
  if (held_ && std::uncaught_exceptions() == exceptions_) gate_->acquire(device_);
}

}  // namespace meshflow::runtime::cpu
