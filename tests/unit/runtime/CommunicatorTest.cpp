// The cpu backend's communication when nothing goes wrong: messages, every
// collective against a serial computation, and deterministic reductions.
// Catch2's assertions are not thread-safe, so device bodies only record what
// they got; the checks run after LocalCluster::run has joined the threads.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "tests/unit/RowTensors.h"
#include "runtime/cpu/LocalCluster.h"

using meshflow::runtime::Communicator;
using meshflow::runtime::groupText;
using meshflow::runtime::randomInts;
using meshflow::runtime::randomNormal;
using meshflow::runtime::Shape;
using meshflow::runtime::Tensor;
using meshflow::runtime::cpu::LocalCluster;

namespace {

// ---- The serial computations the collectives must match ----

// ((x0 + x1) + x2) + ..., element by element.
Tensor serialSum(const std::vector<Tensor>& inputs) {
  Tensor sum = inputs[0];
  for (std::size_t k = 1; k < inputs.size(); ++k) {
    if (sum.dtype() == meshflow::ir::DType::I32) {
      for (std::size_t i = 0; i < sum.i32().size(); ++i) sum.i32()[i] += inputs[k].i32()[i];
    } else {
      for (std::size_t i = 0; i < sum.f32().size(); ++i) sum.f32()[i] += inputs[k].f32()[i];
    }
  }
  return sum;
}

using meshflow::test_rows::concatRows;
using meshflow::test_rows::inputOf;
using meshflow::test_rows::rows;

std::vector<Tensor> inputsOf(const std::vector<int>& group, const Shape& shape) {
  std::vector<Tensor> inputs;
  for (int device : group) inputs.push_back(inputOf(device, shape));
  return inputs;
}

bool isMember(const std::vector<int>& group, int device) {
  return std::find(group.begin(), group.end(), device) != group.end();
}

}  // namespace

TEST_CASE("a message is a list of tensors, delivered whole", "[comm][p2p]") {
  LocalCluster cluster({.devices = 2});
  std::vector<Tensor> sent = {Tensor::fromF32({2, 3}, {1, 2, 3, 4, 5, 6}),
                              Tensor::fromI32({4}, {7, -8, 9, 10}), Tensor::scalar(-0.0f)};
  std::vector<Tensor> received;
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    if (device == 0) comm.send(1, 42, sent);
    if (device == 1) received = comm.recv(0, 42);
  });
  REQUIRE(received.size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(received[i].bitEqual(sent[i]));
}

TEST_CASE("messages are matched by tag, in any order; one tag keeps its order", "[comm][p2p]") {
  LocalCluster cluster({.devices = 2});
  std::vector<float> received;
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    if (device == 0) {
      for (std::uint64_t tag : {1, 2, 3}) comm.send(1, tag, {Tensor::scalar(float(tag))});
      comm.send(1, 9, {Tensor::scalar(90)});
      comm.send(1, 9, {Tensor::scalar(91)});
      return;
    }
    for (std::uint64_t tag : {3, 1, 9, 2, 9}) received.push_back(comm.recv(0, tag)[0].item());
  });
  CHECK(received == std::vector<float>{3, 1, 90, 2, 91});
}

TEST_CASE("many messages between every pair of devices, self included", "[comm][p2p]") {
  constexpr int kDevices = 4;
  constexpr int kMessages = 100;
  LocalCluster cluster({.devices = kDevices});
  // received[d]: the senders' values device d got, in receive order; each message
  // also carries the id of the device it was sent to.
  std::vector<std::vector<float>> received(kDevices);
  std::vector<int> misaddressed(kDevices, 0);
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    for (int to = 0; to < kDevices; ++to)
      for (int i = 0; i < kMessages; ++i)
        comm.send(to, i, {Tensor::scalar(float(device * 1000 + i)), Tensor::scalar(float(to))});
    // Receive from the highest peer first and the highest tag first, so most
    // messages wait in their mailboxes.
    for (int from = kDevices; from-- > 0;)
      for (int i = kMessages; i-- > 0;) {
        auto message = comm.recv(from, i);
        received[device].push_back(message[0].item());
        if (message[1].item() != float(device)) ++misaddressed[device];
      }
  });
  for (int device = 0; device < kDevices; ++device) {
    std::vector<float> expected;
    for (int from = kDevices; from-- > 0;)
      for (int i = kMessages; i-- > 0;) expected.push_back(float(from * 1000 + i));
    CHECK(received[device] == expected);
    CHECK(misaddressed[device] == 0);
  }
}

TEST_CASE("every collective on groups of 1 to 5 devices matches a serial computation",
          "[comm][collectives]") {
  struct Results {
    Tensor reduced, reducedIds, gathered, scattered, exchanged, broadcasted;
  };
  // Groups in member order, not ascending, on a cluster with devices left out.
  const std::vector<std::vector<int>> groups = {
      {3}, {3, 1}, {4, 0, 2}, {1, 2, 3, 5}, {5, 3, 0, 4, 1}};
  for (const auto& group : groups) {
    INFO("group " << groupText(group));
    const auto n = static_cast<std::int64_t>(group.size());
    const Shape shape = {2 * n, 3};
    const int root = group.back();
    LocalCluster cluster({.devices = 6});
    std::vector<Results> results(6);
    cluster.run([&](int device) {
      if (!isMember(group, device)) return;
      Communicator& comm = cluster.communicator(device);
      Results& mine = results[device];
      Tensor input = inputOf(device, shape);
      mine.reduced = input;
      mine.reducedIds = randomInts({5}, -1000, 1000, device);
      comm.allReduce(group, {&mine.reduced, &mine.reducedIds});
      comm.allGather(group, input, mine.gathered);
      comm.reduceScatter(group, input, mine.scattered);
      comm.allToAll(group, input, mine.exchanged);
      if (device == root) mine.broadcasted = input;
      comm.broadcast(group, root, mine.broadcasted);
      comm.barrier(group);
    });

    std::vector<Tensor> inputs = inputsOf(group, shape);
    std::vector<Tensor> ids;
    for (int device : group) ids.push_back(randomInts({5}, -1000, 1000, device));
    Tensor sum = serialSum(inputs);
    for (std::int64_t i = 0; i < n; ++i) {
      const Results& got = results[group[i]];
      INFO("member " << i << ", device " << group[i]);
      CHECK(got.reduced.bitEqual(sum));
      CHECK(got.reducedIds.bitEqual(serialSum(ids)));
      CHECK(got.gathered.bitEqual(concatRows(inputs)));
      CHECK(got.scattered.bitEqual(rows(sum, 2 * i, 2)));
      std::vector<Tensor> slices;
      for (const auto& input : inputs) slices.push_back(rows(input, 2 * i, 2));
      CHECK(got.exchanged.bitEqual(concatRows(slices)));
      CHECK(got.broadcasted.bitEqual(inputOf(root, shape)));
    }
    for (int device = 0; device < 6; ++device)
      if (!isMember(group, device)) CHECK_FALSE(results[device].reduced.allocated());
  }
}

TEST_CASE("disjoint groups run their collectives concurrently", "[comm][collectives]") {
  constexpr int kRounds = 10;
  const std::vector<int> groupA = {4, 0, 2};
  const std::vector<int> groupB = {3, 1};
  const std::vector<int> world = {0, 1, 2, 3, 4};
  // For each device and round: the allReduce and allGather results.
  std::vector<std::vector<Tensor>> reduced(5), gathered(5);
  std::vector<Tensor> worldSum(5);
  auto roundInput = [](int device, int round) {
    return randomNormal({4, 2}, device * 100 + round);
  };
  LocalCluster cluster({.devices = 5});
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    const auto& group = isMember(groupA, device) ? groupA : groupB;
    for (int round = 0; round < kRounds; ++round) {
      Tensor x = roundInput(device, round);
      comm.allReduce(group, {&x});
      reduced[device].push_back(x);
      Tensor all;
      comm.allGather(group, roundInput(device, round), all);
      gathered[device].push_back(all);
    }
    worldSum[device] = roundInput(device, kRounds);
    comm.allReduce(world, {&worldSum[device]});
  });

  for (const auto& group : {groupA, groupB}) {
    for (int round = 0; round < kRounds; ++round) {
      std::vector<Tensor> inputs;
      for (int device : group) inputs.push_back(roundInput(device, round));
      for (int device : group) {
        INFO("device " << device << ", round " << round);
        CHECK(reduced[device][round].bitEqual(serialSum(inputs)));
        CHECK(gathered[device][round].bitEqual(concatRows(inputs)));
      }
    }
  }
  std::vector<Tensor> worldInputs;
  for (int device : world) worldInputs.push_back(roundInput(device, kRounds));
  for (int device : world) CHECK(worldSum[device].bitEqual(serialSum(worldInputs)));
}

TEST_CASE("allReduce gives the same bits on every member in every run, whatever the timing",
          "[comm][collectives][determinism]") {
  const std::vector<int> group = {2, 4, 0, 3, 1};
  // Values over eight orders of magnitude, so that the order of the additions
  // shows in the result.
  auto inputOfDevice = [](int device) {
    Tensor x = randomNormal({1000}, 7 + device);
    auto values = x.f32();
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] *= std::pow(10.0f, static_cast<float>((i + device) % 9) - 4);
    return x;
  };
  std::vector<Tensor> inputs;
  for (int device : group) inputs.push_back(inputOfDevice(device));
  Tensor expected = serialSum(inputs);
  std::vector<Tensor> reversed(inputs.rbegin(), inputs.rend());
  REQUIRE_FALSE(serialSum(reversed).bitEqual(expected));  // the test can see a wrong order

  for (int run = 0; run < 20; ++run) {
    LocalCluster cluster({.devices = 5});
    std::vector<Tensor> results(5);
    cluster.run([&](int device) {
      std::mt19937 rng(run * 10 + device);
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
      if (rng() % 2) std::this_thread::yield();
      results[device] = inputOfDevice(device);
      cluster.communicator(device).allReduce(group, {&results[device]});
    });
    for (int device = 0; device < 5; ++device) {
      INFO("run " << run << ", device " << device);
      CHECK(results[device].bitEqual(expected));
    }
  }
}

TEST_CASE("i32 tensors sum as integers, wrapping modulo 2^32", "[comm][collectives]") {
  LocalCluster cluster({.devices = 2});
  std::vector<Tensor> ids = {Tensor::fromI32({3}, {2147483647, -5, 40}),
                             Tensor::fromI32({3}, {1, -7, 2})};
  cluster.run([&](int device) { cluster.communicator(device).allReduce({0, 1}, {&ids[device]}); });
  for (const auto& sum : ids) CHECK(sum.bitEqual(Tensor::fromI32({3}, {-2147483647 - 1, -12, 42})));
}

TEST_CASE("barrier returns once every member has arrived", "[comm][collectives]") {
  LocalCluster cluster({.devices = 4});
  std::atomic<int> arrived = 0;
  std::vector<int> seen(4);
  cluster.run([&](int device) {
    std::this_thread::sleep_for(std::chrono::milliseconds(device * 5));
    ++arrived;
    cluster.communicator(device).barrier({0, 1, 2, 3});
    seen[device] = arrived.load();
  });
  CHECK(seen == std::vector<int>{4, 4, 4, 4});
}

TEST_CASE("broadcast fills an allocated tensor of the root's shape", "[comm][collectives]") {
  LocalCluster cluster({.devices = 3});
  std::vector<Tensor> tensors = {Tensor::zeros({2}), Tensor::fromF32({2}, {5, 6}), Tensor()};
  cluster.run([&](int device) {
    cluster.communicator(device).broadcast({0, 1, 2}, 1, tensors[device]);
  });
  for (const auto& t : tensors) CHECK(t.bitEqual(Tensor::fromF32({2}, {5, 6})));
}

TEST_CASE("a cluster runs again; calls on a group keep counting across runs", "[comm]") {
  LocalCluster cluster({.devices = 2});
  std::vector<float> sums(2);
  for (int run = 1; run <= 3; ++run) {
    cluster.run([&](int device) {
      Tensor x = Tensor::scalar(float(run * (device + 1)));
      cluster.communicator(device).allReduce({0, 1}, {&x});
      sums[device] = x.item();
    });
    CHECK(sums == std::vector<float>{3.0f * run, 3.0f * run});
  }
  CHECK_FALSE(cluster.aborted());
}

TEST_CASE("a started all-reduce lets its member go on communicating until it finishes", "[comm][collectives]") {
  // Device 0 starts its all-reduce, then sends device 1 the message device 1
  // waits for before it starts its own: a blocking all-reduce would deadlock
  // (until the timeout); a started one completes with the same sums.
  LocalCluster cluster({.devices = 2, .timeout = std::chrono::seconds(5)});
  std::vector<Tensor> values = {randomNormal({3, 4}, 1), randomNormal({3, 4}, 2)};
  std::vector<Tensor> results = values;
  std::vector<float> received(2, 0);
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    Tensor& mine = results[static_cast<std::size_t>(device)];
    if (device == 0) {
      auto pending = comm.startAllReduce({0, 1}, {&mine});
      comm.send(1, 9, {Tensor::scalar(42)});
      pending->finish();
    } else {
      received[1] = comm.recv(0, 9)[0].item();
      comm.startAllReduce({0, 1}, {&mine})->finish();
    }
  });
  CHECK(received[1] == 42);
  Tensor expected = serialSum(values);
  CHECK(results[0].bitEqual(expected));
  CHECK(results[1].bitEqual(expected));
}
