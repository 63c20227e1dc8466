// The cpu backend when something goes wrong: disagreeing members, bad
// arguments, timeouts, failing bodies and aborts. Every run must return (never
// hang) with the first failure, and every message is pinned whole.
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <thread>

#include "runtime/cpu/LocalCluster.h"

using meshflow::runtime::CommError;
using meshflow::runtime::Communicator;
using meshflow::runtime::Tensor;
using meshflow::runtime::cpu::DeviceFailure;
using meshflow::runtime::cpu::LocalCluster;
using Kind = CommError::Kind;
using namespace std::chrono_literals;

namespace {

// Runs `body` on every device and returns the DeviceFailure the run ends with.
DeviceFailure failureOf(LocalCluster& cluster, const std::function<void(int)>& body) {
  try {
    cluster.run(body);
  } catch (const DeviceFailure& failure) {
    return failure;
  }
  FAIL("the run succeeded");
  throw std::logic_error("unreachable");
}

// The CommError `call` throws.
CommError commErrorOf(const std::function<void()>& call) {
  try {
    call();
  } catch (const CommError& error) {
    return error;
  }
  FAIL("no CommError");
  throw std::logic_error("unreachable");
}

// What each device's body threw (a CommError's what(), or "" for none), recorded
// before the error is rethrown to run().
struct Thrown {
  explicit Thrown(int devices) : messages(devices), kinds(devices) {}

  void call(int device, const std::function<void()>& body) {
    try {
      body();
    } catch (const CommError& error) {
      messages[device] = error.what();
      kinds[device] = error.kind();
      throw;
    }
  }

  std::vector<std::string> messages;
  std::vector<std::optional<Kind>> kinds;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("members with different shapes fail on every member, naming both devices",
          "[comm][errors]") {
  LocalCluster cluster({.devices = 3});
  Thrown thrown(3);
  DeviceFailure failure = failureOf(cluster, [&](int device) {
    Tensor x = Tensor::zeros({device == 2 ? 5 : 4});
    thrown.call(device, [&] { cluster.communicator(device).allReduce({0, 1, 2}, {&x}); });
  });
  // Each member names itself and the first member it disagrees with.
  const std::vector<std::string> details = {
      "allReduce #0 over group [0, 1, 2]: tensor 0 is f32[4] on device 0 but f32[5] on device 2",
      "allReduce #0 over group [0, 1, 2]: tensor 0 is f32[4] on device 1 but f32[5] on device 2",
      "allReduce #0 over group [0, 1, 2]: tensor 0 is f32[4] on device 0 but f32[5] on device 2"};
  for (int device = 0; device < 3; ++device) {
    INFO("device " << device);
    CHECK(thrown.messages[device] == "device " + std::to_string(device) + ": " + details[device]);
    CHECK(thrown.kinds[device] == Kind::Mismatch);
  }
  CHECK(failure.detail() == details[failure.device()]);
}

TEST_CASE("every way two members can disagree is a Mismatch", "[comm][errors]") {
  struct Case {
    const char* name;
    std::function<void(Communicator&)> device0, device1;
    std::string device1Error;
  };
  const std::vector<Case> cases = {
      {"dtypes",
       [](Communicator& c) {
         Tensor out;
         c.allGather({0, 1}, Tensor::zeros({2}), out);
       },
       [](Communicator& c) {
         Tensor out;
         c.allGather({0, 1}, Tensor::fromI32({2}, {1, 2}), out);
       },
       "device 1: allGather #0 over group [0, 1]: the input is f32[2] on device 0 but i32[2] on "
       "device 1"},
      {"operations",
       [](Communicator& c) {
         Tensor x = Tensor::zeros({2});
         c.allReduce({0, 1}, {&x});
       },
       [](Communicator& c) {
         c.barrier({0, 1});
       },
       "device 1: barrier #0 over group [0, 1]: device 0 called allReduce but device 1 barrier"},
      {"group orders",
       [](Communicator& c) {
         c.barrier({0, 1});
       },
       [](Communicator& c) {
         c.barrier({1, 0});
       },
       "device 1: barrier #0 over group [1, 0]: device 1 gave the group as [1, 0] but device 0 as "
       "[0, 1]"},
      {"roots",
       [](Communicator& c) {
         Tensor x = Tensor::zeros({2});
         c.broadcast({0, 1}, 0, x);
       },
       [](Communicator& c) {
         Tensor x = Tensor::zeros({2});
         c.broadcast({0, 1}, 1, x);
       },
       "device 1: broadcast #0 over group [0, 1] (root device 1): device 0 named root device 0 but "
       "device 1 root device 1"},
      {"tensor counts",
       [](Communicator& c) {
         Tensor x = Tensor::zeros({2});
         c.allReduce({0, 1}, {&x});
       },
       [](Communicator& c) {
         Tensor x = Tensor::zeros({2}), y = Tensor::zeros({2});
         c.allReduce({0, 1}, {&x, &y});
       },
       "device 1: allReduce #0 over group [0, 1]: device 0 passed 1 tensor but device 1 2 tensors"},
      {"broadcast into a tensor of another shape",
       [](Communicator& c) {
         Tensor x = Tensor::zeros({2});
         c.broadcast({0, 1}, 0, x);
       },
       [](Communicator& c) {
         Tensor x = Tensor::zeros({3});
         c.broadcast({0, 1}, 0, x);
       },
       "device 1: broadcast #0 over group [0, 1] (root device 0): the tensor is f32[2] on device 0 "
       "but f32[3] on device 1"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    LocalCluster cluster({.devices = 2});
    Thrown thrown(2);
    failureOf(cluster, [&](int device) {
      Communicator& comm = cluster.communicator(device);
      thrown.call(device, [&] { (device == 0 ? c.device0 : c.device1)(comm); });
    });
    CHECK(thrown.messages[1] == c.device1Error);
    CHECK(thrown.kinds[1] == Kind::Mismatch);
  }
}

TEST_CASE("a call that is wrong on its own is a Usage error before it waits", "[comm][errors]") {
  LocalCluster cluster({.devices = 3});
  Communicator& comm = cluster.communicator(0);
  Tensor x = Tensor::zeros({4, 2});
  Tensor out;
  auto check = [](const CommError& error, const std::string& message) {
    CHECK(error.what() == message);
    CHECK(error.kind() == Kind::Usage);
    CHECK(error.device() == 0);
  };
  check(commErrorOf([&] { comm.send(5, 1, {}); }),
        "device 0: send to device 5 (tag 1): there is no device 5 (the cluster has 3)");
  check(commErrorOf([&] { comm.recv(-1, 2); }),
        "device 0: recv from device -1 (tag 2): there is no device -1 (the cluster has 3)");
  check(commErrorOf([&] {
          comm.allReduce({0, 0}, {&x});
        }),
        "device 0: allReduce over group [0, 0]: device 0 is listed twice");
  check(commErrorOf([&] {
          comm.barrier({1, 2});
        }),
        "device 0: barrier over group [1, 2]: device 0 is not a member");
  check(commErrorOf([&] {
          comm.barrier({0, 3});
        }),
        "device 0: barrier over group [0, 3]: there is no device 3 (the cluster has 3)");
  check(commErrorOf([&] {
          comm.reduceScatter({0, 1, 2}, x, out);
        }),
        "device 0: reduceScatter over group [0, 1, 2]: dim 0 of f32[4, 2] does not split into 3 "
        "equal slices");
  check(commErrorOf([&] {
          comm.allGather({0, 1}, Tensor::scalar(1), out);
        }),
        "device 0: allGather over group [0, 1]: the input f32[] has no axis 0");
  check(commErrorOf([&] {
          comm.broadcast({0, 1}, 2, x);
        }),
        "device 0: broadcast over group [0, 1]: the root is not a member");
  Tensor unallocated;
  check(commErrorOf([&] {
          comm.allReduce({0, 1}, {&x, &unallocated});
        }),
        "device 0: allReduce over group [0, 1]: tensor 1 is unallocated");
  CHECK_FALSE(cluster.aborted());
}

TEST_CASE("a recv that nobody answers times out and ends the run", "[comm][errors][timeout]") {
  LocalCluster cluster({.devices = 3, .timeout = 100ms});
  auto start = std::chrono::steady_clock::now();
  DeviceFailure failure = failureOf(cluster, [&](int device) {
    if (device == 2) cluster.communicator(2).recv(1, 7);
  });
  CHECK(secondsSince(start) < 2.0);
  CHECK(failure.device() == 2);
  CHECK(std::string(failure.what()) ==
        "device 2 failed: recv from device 1 (tag 7) timed out after 100 ms");
  try {
    std::rethrow_exception(failure.cause());
  } catch (const CommError& error) {
    CHECK(error.kind() == Kind::Timeout);
  }
}

TEST_CASE("a collective that a member never joins times out, naming the absent member",
          "[comm][errors][timeout]") {
  LocalCluster cluster({.devices = 3, .timeout = 100ms});
  DeviceFailure failure = failureOf(cluster, [&](int device) {
    if (device != 1) cluster.communicator(device).barrier({0, 1, 2});
  });
  // Devices 0 and 2 both time out; either may be recorded first.
  CHECK((failure.device() == 0 || failure.device() == 2));
  CHECK(failure.detail() ==
        "barrier #0 over group [0, 1, 2] timed out after 100 ms, waiting for "
        "device 1");
}

TEST_CASE("a failing body stops the others at once, and its failure is the one reported",
          "[comm][errors][abort]") {
  // The timeout is long: the run must end because of the abort, not the timeout.
  LocalCluster cluster({.devices = 4, .timeout = 60s});
  Thrown thrown(4);
  auto start = std::chrono::steady_clock::now();
  DeviceFailure failure = failureOf(cluster, [&](int device) {
    Communicator& comm = cluster.communicator(device);
    if (device == 2) {
      std::this_thread::sleep_for(20ms);
      throw std::runtime_error("the data loader ran dry");
    }
    thrown.call(device, [&] {
      if (device == 3) comm.recv(2, 5);
      Tensor x = Tensor::zeros({3});
      comm.allReduce({0, 1, 2}, {&x});
    });
  });
  CHECK(secondsSince(start) < 2.0);
  CHECK(failure.device() == 2);
  CHECK(std::string(failure.what()) == "device 2 failed: the data loader ran dry");
  for (int device : {0, 1})
    CHECK(thrown.messages[device] ==
          "device " + std::to_string(device) +
              ": allReduce #0 over group [0, 1, 2]: aborted: device 2 failed: the data loader ran "
              "dry");
  CHECK(thrown.messages[3] ==
        "device 3: recv from device 2 (tag 5): aborted: device 2 failed: the data loader ran dry");
  CHECK(thrown.kinds[3] == Kind::Aborted);

  // The cluster stays aborted: later calls fail at once, even ones that would not wait.
  CHECK(cluster.aborted());
  CHECK(std::string(commErrorOf([&] { cluster.communicator(0).send(1, 1, {}); }).what()) ==
        "device 0: send to device 1 (tag 1): aborted: device 2 failed: the data loader ran dry");
}

TEST_CASE("abort from outside wakes a blocked recv", "[comm][errors][abort]") {
  LocalCluster cluster({.devices = 2, .timeout = 60s});
  DeviceFailure failure = failureOf(cluster, [&](int device) {
    if (device == 0) {
      std::this_thread::sleep_for(20ms);
      cluster.abort("stopped by the host");
      cluster.abort("a second reason is ignored");
      return;
    }
    cluster.communicator(1).recv(0, 1);
  });
  CHECK(std::string(failure.what()) ==
        "device 1 failed: recv from device 0 (tag 1): aborted: stopped by the host");
}

TEST_CASE("a failure that follows an abort is reported over the abort's consequences",
          "[comm][errors][abort]") {
  LocalCluster cluster({.devices = 2, .timeout = 60s});
  DeviceFailure failure = failureOf(cluster, [&](int device) {
    if (device == 1) cluster.communicator(1).recv(0, 1);  // woken by the abort
    cluster.abort("stopped by the host");
    std::this_thread::sleep_for(50ms);
    throw std::runtime_error("checkpoint write failed");
  });
  CHECK(std::string(failure.what()) == "device 0 failed: checkpoint write failed");
}

TEST_CASE("a body may throw anything", "[comm][errors]") {
  LocalCluster cluster({.devices = 2});
  DeviceFailure failure = failureOf(cluster, [&](int device) {
    if (device == 1) throw 42;
  });
  CHECK(std::string(failure.what()) ==
        "device 1 failed: an exception that is not a std::exception");
}

TEST_CASE("a cluster needs devices and a timeout", "[comm][errors]") {
  CHECK_THROWS_WITH(LocalCluster({.devices = 0}),
                    "a local cluster needs at least one device, not 0");
  CHECK_THROWS_WITH(LocalCluster({.devices = 1, .timeout = 0ms}),
                    "the communication timeout must be positive, not 0 ms");
  LocalCluster cluster({.devices = 2});
  CHECK_THROWS_WITH(cluster.communicator(2), "no device 2 in a local cluster of 2");
  CHECK(cluster.communicator(1).device() == 1);
  CHECK(cluster.communicator(1).deviceCount() == 2);
}
