// cuda::NcclCommunicator on the fake NCCL: the Communicator contract's
// behaviours (tests/unit/runtime/CommunicatorTest.cpp) that hold for it —
// reductions within tolerance instead of bit for bit, as NCCL sums in its own
// order — and its failures: a mismatch on every member, NCCL's asynchronous
// error, a hung peer and a stopped job, each a CommError naming the call.
// Catch2 is not thread-safe: device bodies record, the checks run after.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <string>
#include <thread>
#include <utility>

#include "tests/unit/RowTensors.h"
#include "tests/unit/cuda/NcclTestCluster.h"

using Catch::Matchers::Contains;
using meshflow::runtime::CommError;
using meshflow::runtime::Communicator;
using meshflow::runtime::groupText;
using meshflow::runtime::randomInts;
using meshflow::runtime::randomNormal;
using meshflow::runtime::Shape;
using meshflow::runtime::Tensor;
using meshflow::test::NcclTestCluster;

namespace {

Tensor serialSum(const std::vector<Tensor>& inputs) {
  Tensor sum = inputs[0].clone();
  for (std::size_t k = 1; k < inputs.size(); ++k) {
    if (sum.dtype() == meshflow::ir::DType::I32) {
      for (std::size_t i = 0; i < sum.i32().size(); ++i)
        sum.i32()[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(sum.i32()[i]) +
                                                 static_cast<std::uint32_t>(inputs[k].i32()[i]));
    } else {
      for (std::size_t i = 0; i < sum.f32().size(); ++i) sum.f32()[i] += inputs[k].f32()[i];
    }
  }
  return sum;
}

using meshflow::test_rows::concatRows;
using meshflow::test_rows::inputOf;
using meshflow::test_rows::rows;

bool isMember(const std::vector<int>& group, int device) {
  return std::find(group.begin(), group.end(), device) != group.end();
}

// What a device's call threw, if anything.
struct Failure {
  bool thrown = false;
  CommError::Kind kind = CommError::Kind::Usage;
  std::string what;
};

template <class Body>
Failure failureOf(Body body) {
  try {
    body();
  } catch (const CommError& error) {
    return {true, error.kind(), error.what()};
  }
  return {};
}

}  // namespace

TEST_CASE("NCCL collectives on groups of 1 to 5 devices match a serial computation",
          "[cuda][nccl][collectives]") {
  struct Results {
    Tensor reduced, reducedIds, gathered, scattered, exchanged, broadcasted;
  };
  const std::vector<std::vector<int>> groups = {
      {3}, {3, 1}, {4, 0, 2}, {1, 2, 3, 5}, {5, 3, 0, 4, 1}};
  for (const auto& group : groups) {
    INFO("group " << groupText(group));
    const auto n = static_cast<std::int64_t>(group.size());
    const Shape shape = {2 * n, 3};
    const int root = group.back();
    NcclTestCluster cluster(6);
    std::vector<Results> results(6);
    cluster.run([&](int device) {
      if (!isMember(group, device)) return;
      Communicator& comm = cluster.communicator(device);
      Results& mine = results[static_cast<std::size_t>(device)];
      Tensor input = inputOf(device, shape);
      mine.reduced = input;
      mine.reducedIds = randomInts({5}, -1000, 1000, static_cast<std::uint64_t>(device));
      comm.allReduce(group, {&mine.reduced, &mine.reducedIds});
      comm.allGather(group, input, mine.gathered);
      comm.reduceScatter(group, input, mine.scattered);
      comm.allToAll(group, input, mine.exchanged);
      if (device == root) mine.broadcasted = input;
      comm.broadcast(group, root, mine.broadcasted);
      comm.barrier(group);
    });

    std::vector<Tensor> inputs, ids;
    for (int device : group) {
      inputs.push_back(inputOf(device, shape));
      ids.push_back(randomInts({5}, -1000, 1000, static_cast<std::uint64_t>(device)));
    }
    const Tensor sum = serialSum(inputs);
    for (std::int64_t i = 0; i < n; ++i) {
      const Results& got = results[static_cast<std::size_t>(group[static_cast<std::size_t>(i)])];
      INFO("member " << i);
      CHECK(meshflow::runtime::allClose(got.reduced, sum, 1e-6, 1e-6));
      CHECK(got.reducedIds.bitEqual(serialSum(ids)));
      CHECK(got.gathered.bitEqual(concatRows(inputs)));
      CHECK(meshflow::runtime::allClose(got.scattered, rows(sum, 2 * i, 2), 1e-6, 1e-6));
      std::vector<Tensor> slices;
      for (const auto& input : inputs) slices.push_back(rows(input, 2 * i, 2));
      CHECK(got.exchanged.bitEqual(concatRows(slices)));
      CHECK(got.broadcasted.bitEqual(inputOf(root, shape)));
    }
    // One NCCL communicator per group, its id made once, each member joined once.
    CHECK(cluster.fake->uniqueIdsMade() == 1);
    for (int device = 0; device < 6; ++device) {
      CHECK(cluster.fake->joins(device) == (isMember(group, device) ? 1 : 0));
      CHECK(cluster.communicator(device).ncclCommunicators() ==
            (isMember(group, device) ? 1u : 0u));
    }
  }
}

TEST_CASE("disjoint groups run their NCCL collectives concurrently, each on its own communicator",
          "[cuda][nccl][collectives]") {
  constexpr int kRounds = 10;
  const std::vector<int> groupA = {4, 0, 2};
  const std::vector<int> groupB = {3, 1};
  const std::vector<int> world = {0, 1, 2, 3, 4};
  std::vector<std::vector<Tensor>> reduced(5), gathered(5);
  std::vector<Tensor> worldSum(5);
  auto roundInput = [](int device, int round) {
    return randomNormal({4, 2}, static_cast<std::uint64_t>(device * 100 + round));
  };
  NcclTestCluster cluster(5);
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    const auto& group = isMember(groupA, device) ? groupA : groupB;
    for (int round = 0; round < kRounds; ++round) {
      Tensor x = roundInput(device, round);
      comm.allReduce(group, {&x});
      reduced[static_cast<std::size_t>(device)].push_back(x);
      Tensor all;
      comm.allGather(group, roundInput(device, round), all);
      gathered[static_cast<std::size_t>(device)].push_back(all);
    }
    worldSum[static_cast<std::size_t>(device)] = roundInput(device, kRounds);
    comm.allReduce(world, {&worldSum[static_cast<std::size_t>(device)]});
    comm.barrier(world);
  });
  for (const auto& group : {groupA, groupB})
    for (int round = 0; round < kRounds; ++round) {
      std::vector<Tensor> inputs;
      for (int device : group) inputs.push_back(roundInput(device, round));
      for (int device : group) {
        INFO("device " << device << ", round " << round);
        const auto d = static_cast<std::size_t>(device);
        CHECK(meshflow::runtime::allClose(reduced[d][static_cast<std::size_t>(round)],
                                          serialSum(inputs), 1e-6, 1e-6));
        CHECK(gathered[d][static_cast<std::size_t>(round)].bitEqual(concatRows(inputs)));
      }
    }
  std::vector<Tensor> worldInputs;
  for (int device : world) worldInputs.push_back(roundInput(device, kRounds));
  for (int device : world)
    CHECK(meshflow::runtime::allClose(worldSum[static_cast<std::size_t>(device)],
                                      serialSum(worldInputs), 1e-6, 1e-6));
  // Three groups (A, B, the world), each joined once: three unique ids.
  CHECK(cluster.fake->uniqueIdsMade() == 3);
  CHECK(cluster.communicator(0).ncclCommunicators() == 2);
}

TEST_CASE("i32 sums wrap modulo 2^32; barrier returns once every member has arrived",
          "[cuda][nccl][collectives]") {
  NcclTestCluster cluster(4);
  std::vector<Tensor> ids = {Tensor::fromI32({3}, {2147483647, -5, 40}),
                             Tensor::fromI32({3}, {1, -7, 2}), Tensor::fromI32({3}, {0, 0, 0}),
                             Tensor::fromI32({3}, {0, 0, 0})};
  std::atomic<int> arrived = 0;
  std::vector<int> seen(4);
  cluster.run([&](int device) {
    const auto d = static_cast<std::size_t>(device);
    cluster.communicator(device).allReduce({0, 1, 2, 3}, {&ids[d]});
    std::this_thread::sleep_for(std::chrono::milliseconds(device * 5));
    ++arrived;
    cluster.communicator(device).barrier({0, 1, 2, 3});
    seen[d] = arrived.load();
  });
  for (const auto& sum : ids) CHECK(sum.bitEqual(Tensor::fromI32({3}, {-2147483647 - 1, -12, 42})));
  CHECK(seen == std::vector<int>{4, 4, 4, 4});
}

TEST_CASE("NCCL sums are NCCL's order, not the group's: within tolerance, not bit for bit",
          "[cuda][nccl]") {
  // Values over eight orders of magnitude, so that the order of additions shows.
  const std::vector<int> group = {0, 1, 2, 3};
  auto inputOfDevice = [](int device) {
    Tensor x = randomNormal({1000}, 7 + static_cast<std::uint64_t>(device));
    auto values = x.f32();
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] *=
          std::pow(10.0f, static_cast<float>((i + static_cast<std::size_t>(device)) % 9) - 4);
    return x;
  };
  std::vector<Tensor> inputs;
  for (int device : group) inputs.push_back(inputOfDevice(device));
  NcclTestCluster cluster(4);
  std::vector<Tensor> results(4);
  cluster.run([&](int device) {
    results[static_cast<std::size_t>(device)] = inputOfDevice(device);
    cluster.communicator(device).allReduce(group, {&results[static_cast<std::size_t>(device)]});
  });
  const Tensor expected = serialSum(inputs);
  CHECK_FALSE(results[0].bitEqual(expected));  // the fake sums as a ring might: another order
  for (const Tensor& result : results) {
    CHECK(result.bitEqual(results[0]));
    CHECK(meshflow::runtime::allClose(result, expected, 1e-5, 1e-6));
  }
}

TEST_CASE("NCCL messages are matched by tag, in any order; one tag keeps its order",
          "[cuda][nccl][p2p]") {
  NcclTestCluster cluster(2);
  std::vector<float> received;
  float self = 0;
  std::vector<Tensor> whole;
  const std::vector<Tensor> sent = {Tensor::fromF32({2, 3}, {1, 2, 3, 4, 5, 6}),
                                    Tensor::fromI32({4}, {7, -8, 9, 10}), Tensor(),
                                    Tensor::scalar(-0.0f), Tensor::zeros({0, 3})};
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    if (device == 0) {
      for (std::uint64_t tag : {1, 2, 3}) comm.send(1, tag, {Tensor::scalar(float(tag))});
      comm.send(1, 9, {Tensor::scalar(90)});
      comm.send(1, 9, {Tensor::scalar(91)});
      comm.send(1, 42, sent);
      return;  // its sending thread delivers them after it has returned
    }
    comm.send(1, 5, {Tensor::scalar(55)});
    whole = comm.recv(0, 42);
    for (std::uint64_t tag : {3, 1, 9, 2, 9}) received.push_back(comm.recv(0, tag)[0].item());
    self = comm.recv(1, 5)[0].item();
  });
  CHECK(received == std::vector<float>{3, 1, 90, 2, 91});
  CHECK(self == 55);
  REQUIRE(whole.size() == sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) {
    CHECK(whole[i].allocated() == sent[i].allocated());
    if (sent[i].allocated()) CHECK(whole[i].bitEqual(sent[i]));
  }
  CHECK(cluster.communicator(0).sendChannels() == 1);
  CHECK(cluster.communicator(1).sendChannels() == 0);  // its message to itself took none
}

TEST_CASE("exchanges and rings of NCCL messages do not deadlock", "[cuda][nccl][p2p]") {
  // Every device sends to every device (itself included) first, then
  // receives from the highest peer and tag down: a send that blocked until
  // its receive, or one channel for both directions, would deadlock.
  constexpr int kDevices = 4;
  constexpr int kMessages = 20;
  NcclTestCluster cluster(kDevices);
  std::vector<std::vector<float>> received(kDevices);
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    for (int to = 0; to < kDevices; ++to)
      for (int i = 0; i < kMessages; ++i)
        comm.send(to, static_cast<std::uint64_t>(i), {Tensor::scalar(float(device * 1000 + i))});
    for (int from = kDevices; from-- > 0;)
      for (int i = kMessages; i-- > 0;)
        received[static_cast<std::size_t>(device)].push_back(
            comm.recv(from, static_cast<std::uint64_t>(i))[0].item());
  });
  std::vector<float> expected;
  for (int from = kDevices; from-- > 0;)
    for (int i = kMessages; i-- > 0;) expected.push_back(float(from * 1000 + i));
  for (const auto& got : received) CHECK(got == expected);
  // The pairs' communicators: one per ordered pair of distinct devices.
  CHECK(cluster.fake->uniqueIdsMade() == kDevices * (kDevices - 1));
}

TEST_CASE("a message never sent to itself fails at once; unknown peers are refused",
          "[cuda][nccl][p2p]") {
  NcclTestCluster cluster(2);
  Failure self, unknown;
  cluster.run([&](int device) {
    if (device != 0) return;
    self = failureOf([&] { cluster.communicator(0).recv(0, 3); });
    unknown = failureOf([&] { cluster.communicator(0).send(2, 1, {}); });
  });
  CHECK(self.kind == CommError::Kind::Timeout);
  CHECK_THAT(self.what, Contains("recv from device 0 (tag 3)"));
  CHECK(unknown.kind == CommError::Kind::Usage);
  CHECK_THAT(unknown.what, Contains("there is no device 2 (the cluster has 2)"));
}

TEST_CASE("a hung sender is a Timeout on the receiving device", "[cuda][nccl][p2p][failure]") {
  NcclTestCluster cluster(2, std::chrono::milliseconds(300));
  cluster.fake->hang(0);
  Failure failure;
  cluster.run([&](int device) {
    if (device == 0) cluster.communicator(0).send(1, 7, {Tensor::zeros({3})});
    if (device == 1) failure = failureOf([&] { cluster.communicator(1).recv(0, 7); });
  });
  CHECK(failure.kind == CommError::Kind::Timeout);
  CHECK_THAT(failure.what, Contains("device 1: recv from device 0 (tag 7)") &&
                               Contains("timed out after 300 ms"));
}

TEST_CASE("the communicator's own tags are refused", "[cuda][nccl][p2p]") {
  NcclTestCluster cluster(1);
  Failure sent, received;
  cluster.run([&](int) {
    sent = failureOf([&] { cluster.communicator(0).send(0, 1ull << 63, {Tensor::scalar(1)}); });
    received = failureOf([&] { cluster.communicator(0).recv(0, (1ull << 63) + 7); });
  });
  CHECK(sent.kind == CommError::Kind::Usage);
  CHECK_THAT(sent.what, Contains("send to device 0") && Contains("the NCCL communicator's own"));
  CHECK(received.kind == CommError::Kind::Usage);
}

TEST_CASE("members that disagree get a Mismatch on every member, before NCCL runs",
          "[cuda][nccl]") {
  NcclTestCluster cluster(2);
  std::vector<Failure> gathered(2), broadcasted(2);
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    Tensor out;
    gathered[static_cast<std::size_t>(device)] = failureOf([&] {
      comm.allGather({0, 1}, Tensor::zeros({device == 0 ? 2 : 3}), out);
    });
    Tensor value = device == 0 ? Tensor::fromF32({2}, {1, 2}) : Tensor::zeros({3});
    broadcasted[static_cast<std::size_t>(device)] = failureOf([&] {
      comm.broadcast({0, 1}, 0, value);
    });
  });
  for (const Failure& f : gathered) {
    CHECK(f.kind == CommError::Kind::Mismatch);
    CHECK_THAT(f.what, Contains("allGather #0 over group [0, 1]: the input is f32[2] on device 0 "
                                "but f32[3] on device 1"));
  }
  for (const Failure& f : broadcasted) {
    CHECK(f.kind == CommError::Kind::Mismatch);
    CHECK_THAT(
        f.what,
        Contains("broadcast #1 over group [0, 1] (root device 0): the tensor is f32[2] on device 0 "
                 "but f32[3] on device 1"));
  }
  CHECK(cluster.fake->uniqueIdsMade() == 0);  // neither call reached NCCL
}

TEST_CASE("NCCL's asynchronous error on one device aborts the call on every member",
          "[cuda][nccl][failure]") {
  NcclTestCluster cluster(3);
  cluster.fake->injectAsyncError(1, 3);  // ncclInternalError on device 1
  std::vector<Failure> failures(3);
  cluster.run([&](int device) {
    Tensor x = Tensor::full({4}, 1.0f);
    failures[static_cast<std::size_t>(device)] = failureOf([&] {
      cluster.communicator(device).allReduce({0, 1, 2}, {&x});
    });
  });
  for (int device = 0; device < 3; ++device) {
    const Failure& f = failures[static_cast<std::size_t>(device)];
    INFO(f.what);
    CHECK(f.kind == CommError::Kind::Aborted);
    CHECK_THAT(f.what, Contains("device " + std::to_string(device) +
                                ": allReduce #0 over group [0, 1, 2] failed"));
  }
  CHECK_THAT(failures[1].what, Contains("fake NCCL status 3"));
  CHECK_THAT(failures[0].what, Contains("fake NCCL status 6"));  // the others see the aborted peer
  // An aborted group's communicator stays aborted.
  Failure again;
  cluster.run([&](int device) {
    Tensor x = Tensor::full({4}, 1.0f);
    if (device == 0) again = failureOf([&] { cluster.communicator(0).allReduce({0, 1, 2}, {&x}); });
  });
  CHECK(again.kind == CommError::Kind::Aborted);
  CHECK_THAT(again.what, Contains("was aborted"));
}

TEST_CASE("a hung peer is a Timeout naming the call and group, not a hang",
          "[cuda][nccl][failure]") {
  NcclTestCluster cluster(2, std::chrono::milliseconds(300));
  cluster.fake->peersSeeAborts = false;  // as NCCL over shared memory: the others just wait
  cluster.fake->hang(1);
  std::vector<Failure> failures(2);
  const auto start = std::chrono::steady_clock::now();
  cluster.run([&](int device) {
    Tensor in = Tensor::zeros({2, 2}), out;
    failures[static_cast<std::size_t>(device)] = failureOf([&] {
      cluster.communicator(device).allGather({1, 0}, in, out);
    });
  });
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  for (int device = 0; device < 2; ++device) {
    const Failure& f = failures[static_cast<std::size_t>(device)];
    CHECK(f.kind == CommError::Kind::Timeout);
    CHECK_THAT(f.what,
               Contains("device " + std::to_string(device) + ": allGather #0 over group [1, 0]") &&
                   Contains("timed out after 300 ms"));
  }
}

TEST_CASE("a device that fails stops the others' NCCL waits at once", "[cuda][nccl][failure]") {
  NcclTestCluster cluster(2, std::chrono::seconds(20));
  cluster.fake->hang(1);
  Failure waiting;
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH(cluster.run([&](int device) {
    Tensor x = Tensor::full({4}, 1.0f);
    if (device == 0) {
      waiting = failureOf([&] { cluster.communicator(0).allReduce({0, 1}, {&x}); });
      return;
    }
    { auto started = cluster.communicator(1).startAllReduce({0, 1}, {&x}); }  // enqueued, never run
    throw std::runtime_error("device 1 broke");
  }),
                    Contains("device 1 broke"));
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK(waiting.kind == CommError::Kind::Aborted);
  CHECK_THAT(waiting.what,
             Contains("allReduce #0 over group [0, 1]") && Contains("the job stopped"));
}

TEST_CASE("a started NCCL all-reduce lets its member go on communicating until it finishes",
          "[cuda][nccl]") {
  NcclTestCluster cluster(2, std::chrono::seconds(5));
  std::vector<Tensor> values = {randomNormal({3, 4}, 1), randomNormal({3, 4}, 2)};
  std::vector<Tensor> results = {values[0].clone(), values[1].clone()};
  float received = 0;
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    Tensor& mine = results[static_cast<std::size_t>(device)];
    if (device == 0) {
      auto pending = comm.startAllReduce({0, 1}, {&mine});
      comm.send(1, 9, {Tensor::scalar(42)});
      Tensor all;
      comm.allGather({0, 1}, Tensor::scalar(0).reshaped({1}),
                     all);  // enqueues the started one first
      pending->finish();
    } else {
      received = comm.recv(0, 9)[0].item();
      comm.startAllReduce({0, 1}, {&mine})->finish();
      Tensor all;
      comm.allGather({0, 1}, Tensor::scalar(1).reshaped({1}), all);
    }
  });
  CHECK(received == 42);
  const Tensor expected = serialSum(values);
  CHECK(meshflow::runtime::allClose(results[0], expected, 1e-6, 1e-6));
  CHECK(results[0].bitEqual(results[1]));
}

TEST_CASE("on a joined group a started NCCL all-reduce runs before its member finishes it",
          "[cuda][nccl]") {
  // Device 1 finishes its side and only then sends what device 0 waits for
  // before its own finish(): the reduction must have run without it (it was
  // enqueued at the start, on a stream beside the kernels). The first
  // all-reduce joins the group: joining waits for every member, so a group's
  // first started all-reduce is enqueued later (the test above).
  NcclTestCluster cluster(2, std::chrono::seconds(5));
  std::vector<Tensor> values = {randomNormal({3, 4}, 3), randomNormal({3, 4}, 4)};
  std::vector<Tensor> results = {values[0].clone(), values[1].clone()};
  std::vector<Failure> failures(2);
  float received = 0;
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    Tensor& mine = results[static_cast<std::size_t>(device)];
    failures[static_cast<std::size_t>(device)] = failureOf([&] {
      Tensor joins = Tensor::full({1}, 1.0f);
      comm.allReduce({0, 1}, {&joins});
      if (device == 0) {
        auto pending = comm.startAllReduce({0, 1}, {&mine});
        received = comm.recv(1, 7)[0].item();
        pending->finish();
      } else {
        comm.startAllReduce({0, 1}, {&mine})->finish();
        comm.send(0, 7, {Tensor::scalar(5)});
      }
    });
  });
  for (const Failure& f : failures) CHECK_FALSE(f.thrown);
  CHECK(received == 5);
  const Tensor expected = serialSum(values);
  CHECK(meshflow::runtime::allClose(results[0], expected, 1e-6, 1e-6));
  CHECK(results[0].bitEqual(results[1]));
}

TEST_CASE("finishing a started NCCL all-reduce waits for it, not for those started after it",
          "[cuda][nccl]") {
  NcclTestCluster cluster(2, std::chrono::seconds(5));
  std::vector<Tensor> first = {Tensor::full({4}, 1.0f), Tensor::full({4}, 2.0f)};
  std::vector<Tensor> second = {Tensor::full({2}, 10.0f), Tensor::full({2}, 20.0f)};
  std::vector<Failure> failures(2);
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    const auto d = static_cast<std::size_t>(device);
    failures[d] = failureOf([&] {
      Tensor joins = Tensor::full({1}, 1.0f);
      comm.allReduce({0, 1}, {&joins});
      if (device == 0) {
        auto a = comm.startAllReduce({0, 1}, {&first[d]});
        auto b = comm.startAllReduce({0, 1}, {&second[d]});
        a->finish();  // device 1 starts b only after the message below
        comm.send(1, 3, {Tensor::scalar(1)});
        b->finish();
      } else {
        comm.startAllReduce({0, 1}, {&first[d]})->finish();
        comm.recv(0, 3);
        comm.startAllReduce({0, 1}, {&second[d]})->finish();
      }
    });
  });
  for (const Failure& f : failures) CHECK_FALSE(f.thrown);
  for (std::size_t d = 0; d < 2; ++d) {
    CHECK(std::as_const(first[d]).f32()[0] == 3.0f);
    CHECK(std::as_const(second[d]).f32()[1] == 30.0f);
  }
}

TEST_CASE("members that start disagreeing all-reduces on a joined group get a Mismatch at finish",
          "[cuda][nccl]") {
  // NCCL has the reduction already; the signatures are compared at finish,
  // and the group's communicator is aborted, so nothing waits on it.
  NcclTestCluster cluster(2, std::chrono::seconds(5));
  std::vector<Failure> finished(2), after(2);
  cluster.run([&](int device) {
    Communicator& comm = cluster.communicator(device);
    Tensor joins = Tensor::full({1}, 1.0f);
    comm.allReduce({0, 1}, {&joins});
    Tensor mine = Tensor::zeros({device == 0 ? 2 : 3});
    auto pending = comm.startAllReduce({0, 1}, {&mine});
    finished[static_cast<std::size_t>(device)] = failureOf([&] { pending->finish(); });
    after[static_cast<std::size_t>(device)] = failureOf([&] { comm.allReduce({0, 1}, {&joins}); });
  });
  for (std::size_t d = 0; d < 2; ++d) {
    INFO("device " << d);
    CHECK(finished[d].kind == CommError::Kind::Mismatch);
    CHECK_THAT(finished[d].what, Contains("allReduce #1 over group [0, 1]") &&
                                     Contains("f32[2] on device 0 but f32[3] on device 1"));
    CHECK(after[d].kind == CommError::Kind::Aborted);
    CHECK_THAT(after[d].what, Contains("aborted by an earlier failure"));
  }
}

TEST_CASE("messages never received are abandoned when the communicators go, not waited for",
          "[cuda][nccl][p2p]") {
  const auto start = std::chrono::steady_clock::now();
  {
    NcclTestCluster cluster(3);
    cluster.run([&](int device) {
      Communicator& comm = cluster.communicator(device);
      if (device == 0) {
        comm.send(1, 1, {Tensor::zeros({4})});
        comm.send(1, 2, {Tensor::zeros({4})});  // device 1 never asks for it
        comm.send(2, 1, {Tensor::zeros({4})});  // device 2 never receives at all
      }
      if (device == 1) comm.recv(0, 1);  // joins the pair's communicator, takes the first
    });
  }
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}
