// Device threads sharing host cores (cpu/CoreGate.h): never more computing at
// once than there are cores, served in the order they asked, and a device
// blocked in communication gives its core up — so a core count of one cannot
// deadlock a collective.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/cpu/CoreGate.h"
#include "runtime/cpu/LocalCluster.h"

using meshflow::runtime::Communicator;
using meshflow::runtime::Tensor;
using meshflow::runtime::cpu::CoreGate;
using meshflow::runtime::cpu::DeviceFailure;
using meshflow::runtime::cpu::LocalCluster;
using namespace std::chrono_literals;

namespace {

// How many bodies are inside a compute section at once, and the most ever.
struct Occupancy {
  std::atomic<int> now{0};
  std::atomic<int> most{0};

  void enter() {
    int inside = ++now;
    int seen = most.load();
    while (inside > seen && !most.compare_exchange_weak(seen, inside)) {
    }
  }
  void leave() { --now; }
};

void compute(CoreGate& gate, int device, Occupancy& occupancy) {
  CoreGate::Hold core(&gate, device);
  occupancy.enter();
  std::this_thread::sleep_for(2ms);
  occupancy.leave();
}

}  // namespace

TEST_CASE("at most `cores` devices compute at once", "[runtime][cores]") {
  for (int cores : {1, 2, 3}) {
    CoreGate gate(cores, 6);
    Occupancy occupancy;
    std::vector<std::thread> threads;
    for (int device = 0; device < 6; ++device)
      threads.emplace_back([&, device] {
        for (int i = 0; i < 5; ++i) compute(gate, device, occupancy);
      });
    for (auto& thread : threads) thread.join();
    INFO("cores " << cores);
    CHECK(occupancy.most.load() == cores);
  }
}

TEST_CASE("a gate with as many cores as devices never waits", "[runtime][cores]") {
  CoreGate gate(4, 4);
  CHECK(gate.cores() == 0);
  CoreGate unlimited(0, 4);
  CHECK(unlimited.cores() == 0);
  // Without a limit nothing is held, so holding twice is no mistake.
  CoreGate::Hold a(&unlimited, 1);
  CoreGate::Hold b(&unlimited, 1);
}

TEST_CASE("waiting devices get the core in the order they asked", "[runtime][cores]") {
  CoreGate gate(1, 4);
  gate.acquire(0);
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int device : {3, 1, 2}) {
    threads.emplace_back([&, device] {
      CoreGate::Hold core(&gate, device);
      std::lock_guard lock(mutex);
      order.push_back(device);
    });
    std::this_thread::sleep_for(20ms);  // device 3 asks first, then 1, then 2
  }
  gate.release(0);
  for (auto& thread : threads) thread.join();
  CHECK(order == std::vector<int>{3, 1, 2});
}

TEST_CASE("lined up, the devices get the cores in device order, whoever asks first", "[runtime][cores]") {
  // One core, so a device records its turn while no other can hold a core:
  // the order recorded is the order the core went round in. (With two cores,
  // two devices could hold them at once and record in either order.)
  CoreGate gate(1, 4);
  gate.lineUp();
  std::mutex mutex;
  std::vector<int> order;
  std::vector<std::thread> threads;
  for (int device : {3, 2, 1}) {
    threads.emplace_back([&, device] {
      CoreGate::Hold core(&gate, device);
      std::lock_guard lock(mutex);
      order.push_back(device);
    });
    std::this_thread::sleep_for(20ms);  // device 3 asks first (most likely), then 2, then 1
  }
  {
    std::lock_guard lock(mutex);
    CHECK(order.empty());  // device 0 holds the core without having asked
  }
  gate.acquire(0);  // takes the core it was given at once
  gate.release(0);
  for (auto& thread : threads) thread.join();
  CHECK(order == std::vector<int>{1, 2, 3});
  // Lining up again needs every core back and nobody waiting.
  gate.lineUp();
  gate.acquire(0);
  CHECK_THROWS_WITH(gate.lineUp(), "devices can line up for the cores only while none holds or waits for one");
}

TEST_CASE("takeTurn lets the devices that wait go first", "[runtime][cores]") {
  CoreGate gate(1, 3);
  gate.acquire(0);
  gate.takeTurn(0);  // nobody waits: device 0 keeps its core
  std::mutex mutex;
  std::vector<int> order;
  std::thread waiter([&] {
    CoreGate::Hold core(&gate, 1);
    std::lock_guard lock(mutex);
    order.push_back(1);
  });
  std::this_thread::sleep_for(20ms);
  gate.takeTurn(0);  // device 1 goes first, then device 0 has its core again
  {
    std::lock_guard lock(mutex);
    order.push_back(0);
  }
  gate.release(0);
  waiter.join();
  CHECK(order == std::vector<int>{1, 0});
}

TEST_CASE("a device blocked in a collective gives its core up", "[runtime][cores]") {
  // One core, four devices whose bodies each hold it (LocalCluster::run) while
  // they all-reduce: each must yield the core while it waits for the others,
  // or none could finish.
  LocalCluster cluster({.devices = 4, .timeout = 10s, .cores = 1});
  std::vector<float> sums(4);
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    Tensor x = Tensor::full({2}, static_cast<float>(device + 1));
    comm.allReduce({0, 1, 2, 3}, {&x});
    if (device > 0) comm.send(0, 7, {x});
    if (device == 0)
      for (int peer = 1; peer < 4; ++peer) x.f32()[0] += comm.recv(peer, 7)[0].f32()[0];
    sums[static_cast<std::size_t>(device)] = x.f32()[0];
  });
  CHECK(sums == std::vector<float>{40, 10, 10, 10});
}

TEST_CASE("a failing device on a shared core stops the others", "[runtime][cores]") {
  LocalCluster cluster({.devices = 3, .timeout = 60s, .cores = 1});
  auto start = std::chrono::steady_clock::now();
  try {
    cluster.run([&](int device) {
      if (device == 1) throw std::runtime_error("a kernel failed");
      cluster.communicator(device).barrier({0, 1, 2});
    });
    FAIL("the run should have failed");
  } catch (const DeviceFailure& failure) {
    CHECK(failure.device() == 1);
    CHECK(std::string(failure.what()) == "device 1 failed: a kernel failed");
  }
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}
