// The MPI transport under `mpirun -np K` (tests/mpi/Mpi.cmake registers the
// runs). Each rank runs every operation twice: on its MpiProcess's
// communicator, and on a LocalCluster of K threads in this process given the
// same inputs, and checks that its own device's results are the cpu
// backend's to the bit. Other cases (--case=timeout, abort, sigkill,
// sigstop) check how a failed rank ends the others; run_case.sh checks the
// exit code, the time and the output of the whole job.
//
// A failed check prints "rank R: FAIL: ..." and the rank exits 1.
#include <fmt/format.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/cpu/LocalCluster.h"
#include "runtime/mpi/MpiProcess.h"

using namespace meshflow::runtime;
using meshflow::ir::DType;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<int> failures = 0;  // bodies run on the LocalCluster's threads too
int me = 0;

void check(bool ok, const std::string& what) {
  if (ok) return;
  ++failures;
  fmt::print(stderr, "rank {}: FAIL: {}\n", me, what);
}

double millisSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// ---- Inputs ----

Tensor input(DType dtype, Shape shape, std::uint64_t seed) {
  switch (dtype) {
    case DType::F32:
      return randomNormal(std::move(shape), seed);
    case DType::I32:
      return randomInts(std::move(shape), -2000000000, 2000000000, seed);
    default:
      return randomNormal(std::move(shape), seed).castTo(dtype);
  }
}

std::uint64_t seedOf(int test, int device, int index = 0) {
  return 1000003ull * static_cast<std::uint64_t>(test) +
         1009ull * static_cast<std::uint64_t>(device) + static_cast<std::uint64_t>(index);
}

// Groups that cover every device, each given in its own order: the group of
// `device` under each partition.
std::vector<int> groupOf(const std::string& partition, int device, int devices) {
  std::vector<int> group;
  if (partition == "all")
    for (int d = 0; d < devices; ++d) group.push_back(d);
  else if (partition == "reversed")
    for (int d = devices - 1; d >= 0; --d) group.push_back(d);
  else if (partition == "rotated")
    for (int d = 0; d < devices; ++d) group.push_back((d + 1) % devices);
  else if (partition == "parity")  // evens or odds, descending
    for (int d = devices - 1; d >= 0; --d) {
      if (d % 2 == device % 2) group.push_back(d);
    }
  else if (partition == "pairs") {  // {2i + 1, 2i}, the last one alone when odd
    int low = device & ~1;
    if (low + 1 < devices) group.push_back(low + 1);
    group.push_back(low);
  } else if (partition == "single")
    group.push_back(device);
  return group;
}

const std::vector<std::string> kPartitions = {"all",    "reversed", "rotated",
                                              "parity", "pairs",    "single"};
const std::vector<DType> kDTypes = {DType::F32, DType::F16, DType::BF16, DType::I32};

// ---- Running one body on both backends ----

using Outcome = std::vector<Tensor>;  // what a body computed; an error is a message in `errors`
using Body = std::function<Outcome(Communicator&, int device)>;

struct Result {
  Outcome tensors;
  std::string error;  // CommError what(), or empty
};

Result runOn(Communicator& comm, const Body& body) {
  Result result;
  try {
    result.tensors = body(comm, comm.device());
  } catch (const CommError& e) {
    result.error = e.what();
  }
  return result;
}

// Runs `body` on the cluster's devices and on `comm`; checks this rank's
// results (or errors) are the same.
void compare(cpu::LocalCluster& cluster, Communicator& comm, const std::string& name,
             const Body& body, bool exact = true) {
  std::vector<Result> expected(static_cast<std::size_t>(cluster.deviceCount()));
  cluster.run([&](int device) { expected[device] = runOn(cluster.communicator(device), body); });
  Result got = runOn(comm, body);
  const Result& want = expected[me];
  check(got.error == want.error, fmt::format("{}: error \"{}\" where the cpu backend gives \"{}\"",
                                             name, got.error, want.error));
  check(got.tensors.size() == want.tensors.size(), name + ": a different number of results");
  for (std::size_t i = 0; i < std::min(got.tensors.size(), want.tensors.size()); ++i) {
    const Tensor& a = got.tensors[i];
    const Tensor& b = want.tensors[i];
    bool same = exact || a.dtype() == DType::I32 || a.dtype() != b.dtype() || a.shape() != b.shape()
                    ? a.bitEqual(b)
                    : allClose(a, b, 1e-5, 1e-5);
    check(same, fmt::format("{}: result {} is {} and differs from the cpu backend's {}", name, i,
                            a.typeText(), b.typeText()));
  }
}

// ---- The operations case ----

void checkMessages(Communicator& comm, int devices) {
  int next = (me + 1) % devices, previous = (me + devices - 1) % devices;
  auto message = [](int from, int index) {
    std::vector<Tensor> m;
    m.push_back(
        input(DType::F32, {3, static_cast<std::int64_t>(index + 1)}, seedOf(1, from, index)));
    m.push_back(input(DType::BF16, {5}, seedOf(2, from, index)));
    m.push_back(Tensor());  // unallocated
    m.push_back(input(DType::I32, {0}, seedOf(3, from, index)));
    return m;
  };
  auto same = [](const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].allocated() != b[i].allocated()) return false;
      if (a[i].allocated() && !a[i].bitEqual(b[i])) return false;
    }
    return true;
  };
  // Three messages with one identity arrive in order; another tag is
  // received before them although sent after; a big one (3 MiB, past the
  // eager limit); one to itself.
  for (int i = 0; i < 3; ++i) comm.send(next, 1, message(me, i));
  comm.send(next, 2, message(me, 7));
  comm.send(next, 3, {input(DType::F32, {768, 1024}, seedOf(4, me))});
  comm.send(me, 4, message(me, 9));
  check(same(comm.recv(previous, 2), message(previous, 7)), "recv tag 2");
  for (int i = 0; i < 3; ++i)
    check(same(comm.recv(previous, 1), message(previous, i)),
          fmt::format("recv tag 1, message {}", i));
  auto big = comm.recv(previous, 3);
  check(big.size() == 1 && big[0].bitEqual(input(DType::F32, {768, 1024}, seedOf(4, previous))),
        "big message");
  check(same(comm.recv(me, 4), message(me, 9)), "message to itself");
}

// Control messages: from the controller to each worker and back, in order,
// apart from the communicator's messages of the same moment.
void checkControl(mpi::MpiProcess& process) {
  int size = process.size();
  if (me == 0) {
    for (int worker = 1; worker < size; ++worker)
      for (int i = 0; i < 3; ++i)
        process.sendControl(worker, fmt::format("command {} to {}", i, worker));
    process.sendControl(0, "to myself");
    check(process.recvControl(0) == "to myself", "a control message to itself");
    for (int worker = 1; worker < size; ++worker)
      for (int i = 0; i < 3; ++i) {
        std::string reply = process.recvControl(worker);
        check(reply == fmt::format("done {} by {}", i, worker), "control reply: " + reply);
      }
    check(process.recvControl(size - 1) == std::string(100000, 'x') + '\0',
          "a long control message");
    return;
  }
  for (int i = 0; i < 3; ++i) {
    std::string command = process.recvControl(0);
    check(command == fmt::format("command {} to {}", i, me), "control command: " + command);
    process.sendControl(0, fmt::format("done {} by {}", i, me));
  }
  if (me == size - 1) process.sendControl(0, std::string(100000, 'x') + '\0');
}

void checkOperations(mpi::MpiProcess& process) {
  Communicator& comm = process.communicator();
  int devices = process.size();
  checkControl(process);
  cpu::LocalCluster cluster({.devices = devices, .timeout = std::chrono::milliseconds(60000)});
  int test = 100;

  checkMessages(comm, devices);

  for (const std::string& partition : kPartitions) {
    for (DType dtype : kDTypes) {
      std::string type = meshflow::ir::dtypeName(dtype);
      ++test;
      compare(
          cluster, comm, "allReduce " + partition + " " + type, [&](Communicator& c, int device) {
            auto group = groupOf(partition, device, devices);
            std::vector<Tensor> ts = {
                input(dtype, {37}, seedOf(test, device, 0)),
                input(dtype, {1}, seedOf(test, device, 1)),
                input(dtype, {static_cast<std::int64_t>(devices) * 3, 5}, seedOf(test, device, 2)),
                input(dtype, {0}, seedOf(test, device, 3))};
            std::vector<Tensor*> ptrs;
            for (Tensor& t : ts) ptrs.push_back(&t);
            c.allReduce(group, ptrs);  // small: whole operands exchanged
            // Whole operands too long for the header's message to go eagerly
            // (Open MPI's 4 KiB): the header, then the operands.
            Tensor whole = input(dtype, {2000}, seedOf(test, device, 5));
            c.allReduce(group, {&whole});
            // Big enough to go in chunks, and in chunks of unequal sizes
            // (through the node's slots when the chunks fit one).
            Tensor big = input(dtype, {9001}, seedOf(test, device, 4));
            ptrs.push_back(&big);
            c.allReduce(group, ptrs);
            // Chunks too long for a node slot: through MPI.
            Tensor bigger = input(dtype, {40001}, seedOf(test, device, 6));
            c.allReduce(group, {&bigger});
            ts.push_back(big);
            ts.push_back(whole);
            ts.push_back(bigger);
            return ts;
          });
      ++test;
      compare(cluster, comm, "allGather " + partition + " " + type,
              [&](Communicator& c, int device) {
                Tensor out;
                c.allGather(groupOf(partition, device, devices),
                            input(dtype, {3, 4}, seedOf(test, device)), out);
                return Outcome{out};
              });
      ++test;
      compare(cluster, comm, "reduceScatter " + partition + " " + type,
              [&](Communicator& c, int device) {
                auto group = groupOf(partition, device, devices);
                auto n = static_cast<std::int64_t>(group.size());
                Tensor out;
                c.reduceScatter(group, input(dtype, {n * 2, 3}, seedOf(test, device)), out);
                return Outcome{out};
              });
      ++test;
      compare(cluster, comm, "allToAll " + partition + " " + type,
              [&](Communicator& c, int device) {
                auto group = groupOf(partition, device, devices);
                auto n = static_cast<std::int64_t>(group.size());
                Tensor out;
                c.allToAll(group, input(dtype, {n * 2, 5}, seedOf(test, device)), out);
                return Outcome{out};
              });
      ++test;
      compare(cluster, comm, "broadcast " + partition + " " + type,
              [&](Communicator& c, int device) {
                auto group = groupOf(partition, device, devices);
                int root = group[group.size() / 2];
                // The root's value; members with an odd id come with a tensor already
                // allocated to the right type.
                Tensor t = device == root || device % 2 ? input(dtype, {4, 3}, seedOf(test, device))
                                                        : Tensor();
                c.broadcast(group, root, t);
                return Outcome{t};
              });
    }
    compare(cluster, comm, "barrier " + partition, [&](Communicator& c, int device) {
      c.barrier(groupOf(partition, device, devices));
      return Outcome{};
    });
  }

  // A large all-reduce (4 MiB: rendezvous messages, uneven chunks).
  ++test;
  compare(cluster, comm, "allReduce of 1M + 3 floats", [&](Communicator& c, int device) {
    Tensor t = input(DType::F32, {(1 << 20) + 3}, seedOf(test, device));
    c.allReduce(groupOf("rotated", device, devices), {&t});
    return Outcome{t};
  });

  // startAllReduce overlapping messages and other collectives, finished out
  // of order; one member drops its handle unfinished and the others still
  // complete theirs.
  ++test;
  compare(cluster, comm, "startAllReduce overlapping", [&](Communicator& c, int device) {
    Tensor a = input(DType::F32, {1000}, seedOf(test, device, 0));
    Tensor b = input(DType::BF16, {64, 3}, seedOf(test, device, 1));
    Tensor x = input(DType::F32, {(1 << 18) + 1}, seedOf(test, device, 2));
    auto all = groupOf("reversed", device, devices), pairs = groupOf("pairs", device, devices);
    auto first = c.startAllReduce(all, {&a});
    c.send((device + 1) % devices, 11, {input(DType::F32, {5}, seedOf(test, device, 3))});
    auto big = c.startAllReduce(groupOf("parity", device, devices), {&x});
    Tensor gathered;
    c.allGather(pairs, input(DType::I32, {2}, seedOf(test, device, 4)), gathered);
    auto second = c.startAllReduce(all, {&b});
    auto message = c.recv((device + devices - 1) % devices, 11);
    second->finish();
    big->finish();
    first->finish();
    Tensor dropped = input(DType::F32, {33}, seedOf(test, device, 5));
    auto handle = c.startAllReduce(all, {&dropped});
    if (device != 0) handle->finish();
    handle.reset();
    Tensor after = input(DType::F32, {9}, seedOf(test, device, 6));
    c.allReduce(all, {&after});
    return Outcome{a,    b, x, gathered, message.at(0), device != 0 ? dropped : Tensor::zeros({1}),
                   after};
  });

  // MPI's own all-reduce when determinism is not asked for: f32 within
  // rounding, i32 exact, half types (which MPI cannot sum) as before.
  mpi::MpiOptions loose = process.options();
  loose.deterministic = false;
  process.setOptions(loose);
  for (std::string partition : {"reversed", "pairs"}) {
    ++test;
    compare(
        cluster, comm, std::string("MPI_Allreduce ") + partition,
        [&](Communicator& c, int device) {
          auto group = groupOf(partition, device, devices);
          Tensor f = input(DType::F32, {1000}, seedOf(test, device, 0));
          Tensor i = input(DType::I32, {77}, seedOf(test, device, 1));
          Tensor h = input(DType::F16, {10}, seedOf(test, device, 2));
          c.allReduce(group, {&f, &i});
          auto pending = c.startAllReduce(group, {&h});
          pending->finish();
          return Outcome{f, i, h};
        },
        false);
  }
  loose.deterministic = true;
  process.setOptions(loose);

  // Calls that are wrong: on one member alone (Usage) and between members
  // (Mismatch), with the cpu backend's messages.
  compare(cluster, comm, "usage errors", [&](Communicator& c, int device) {
    std::vector<std::string> errors;
    auto attempt = [&](const std::function<void()>& f) {
      try {
        f();
      } catch (const CommError& e) {
        errors.push_back(e.what());
      }
    };
    Tensor t = Tensor::zeros({3});
    attempt([&] { c.allReduce({(device + 1) % devices}, {&t}); });
    attempt([&] { c.allReduce({device, device}, {&t}); });
    attempt([&] { c.send(devices, 1, {}); });
    attempt([&] { c.recv(-1, 1); });
    Tensor out;
    attempt([&] { c.reduceScatter({device}, Tensor::scalar(1), out); });
    check(errors.size() == 5, "every wrong call throws");
    std::string all;
    for (auto& e : errors) all += e + "\n";
    return Outcome{Tensor::fromI32({static_cast<std::int64_t>(all.size())},
                                   std::vector<std::int32_t>(all.begin(), all.end()))};
  });
  if (devices >= 2) {
    // Whole operands, and chunks (through the node's slots: a post for one
    // reader must be found by a member that orders the group otherwise).
    for (std::int64_t elements : {8, 9001}) {
      std::string name = elements == 8 ? "mismatched group order" : "mismatched group order in chunks";
      compare(cluster, comm, name, [&](Communicator& c, int device) {
        Tensor t = Tensor::full({elements}, 1.0f);
        c.allReduce(
            device == 0 ? groupOf("reversed", device, devices) : groupOf("all", device, devices),
            {&t});
        return Outcome{t};
      });
    }
    compare(cluster, comm, "mismatched shapes", [&](Communicator& c, int device) {
      Tensor out;
      c.allGather(groupOf("all", device, devices), Tensor::zeros({device == devices - 1 ? 3 : 2}),
                  out);
      return Outcome{out};
    });
    compare(cluster, comm, "mismatched operations", [&](Communicator& c, int device) {
      Tensor t = Tensor::full({4}, 2.0f);
      if (device == 0)
        c.barrier(groupOf("all", device, devices));
      else
        c.allReduce(groupOf("all", device, devices), {&t});
      return Outcome{t};
    });
  }
}

// ---- Failure cases ----

// Ends MPI from the test (every rank is alive): after a failure the
// MpiProcess would not finalize, and mpirun would call the job failed.
int endCleanly() {
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  return failures ? 1 : 0;
}

void expectError(CommError::Kind kind, const std::function<void()>& f, const std::string& expected,
                 Clock::time_point since, double atLeastMs, double atMostMs) {
  try {
    f();
    check(false, "no error where \"" + expected + "\" was expected");
  } catch (const CommError& e) {
    double ms = millisSince(since);
    fmt::print("rank {}: after {:.0f} ms: {}\n", me, ms, e.what());
    check(e.kind() == kind, fmt::format("the error kind of \"{}\"", e.what()));
    check(std::string(e.what()).find(expected) != std::string::npos,
          fmt::format("\"{}\" does not say \"{}\"", e.what(), expected));
    check(ms >= atLeastMs && ms <= atMostMs,
          fmt::format("the error came after {:.0f} ms, not within [{}, {}] ms", ms, atLeastMs,
                      atMostMs));
  }
}

int timeoutCase(mpi::MpiProcess& process) {
  Communicator& comm = process.communicator();
  int last = process.size() - 1;
  double limit = static_cast<double>(process.options().timeout.count());
  if (me == last) {
    // Never sends nor joins; waits until the others are done.
    process.recvControl(0);
    return endCleanly();
  }
  std::vector<int> all, others;
  for (int d = 0; d < process.size(); ++d) all.push_back(d);
  for (int d = 0; d < last; ++d) others.push_back(d);
  Tensor t = Tensor::zeros({16});
  comm.barrier(others);  // all start the all-reduce together
  auto start = Clock::now();
  expectError(
      CommError::Kind::Timeout, [&] { comm.allReduce(all, {&t}); },
      fmt::format("allReduce #0 over group {} timed out after 1500 ms, waiting for device {}",
                  groupText(all), last),
      start, limit, limit + 4000);
  if (me == 0) {
    start = Clock::now();
    expectError(
        CommError::Kind::Timeout, [&] { comm.recv(last, 9); },
        fmt::format("device 0: recv from device {} (tag 9) timed out after 1500 ms", last), start,
        limit, limit + 4000);
    process.sendControl(last, "done");
  }
  return endCleanly();
}

int abortCase(mpi::MpiProcess& process) {
  Communicator& comm = process.communicator();
  int size = process.size();
  if (me == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto now = Clock::now().time_since_epoch();
    process.abort(fmt::format("boom at {}",
                              std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()));
    auto start = Clock::now();
    expectError(
        CommError::Kind::Aborted, [&] { comm.recv(0, 1); }, "aborted: rank 1 failed: boom at",
        start, 0, 100);
    return endCleanly();
  }
  // Each rank waits in something else when the notice comes.
  std::vector<int> all;
  for (int d = 0; d < size; ++d) all.push_back(d);
  std::function<void()> wait;
  Tensor t = Tensor::zeros({1000}), out;
  if (me == 0) wait = [&] { comm.recv(1, 4); };
  if (me == 2) wait = [&] { comm.allReduce(all, {&t}); };
  if (me == 3) wait = [&] { process.recvControl(1); };
  if (me >= 4 && me % 2 == 0) wait = [&] { comm.allGather({me, 1}, t, out); };
  // Waits outside MPI (a GPU process in NCCL) poll stopSeen; once it says
  // so, every call fails with the abort's reason.
  if (me >= 4 && me % 2 == 1) wait = [&] {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (!process.stopSeen() && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    check(process.stopSeen(), "stopSeen never saw the abort");
    comm.recv(0, 77);
  };
  try {
    wait();
    check(false, "no abort seen");
  } catch (const CommError& e) {
    std::string what = e.what();
    auto at = what.find("boom at ");
    check(e.kind() == CommError::Kind::Aborted && at != std::string::npos,
          "an abort naming rank 1, not: " + what);
    if (at != std::string::npos) {
      auto sent = std::chrono::nanoseconds(std::stoll(what.substr(at + 8)));
      double ms =
          std::chrono::duration<double, std::milli>(Clock::now().time_since_epoch() - sent).count();
      fmt::print("rank {}: aborted {:.2f} ms after rank 1 called abort: {}\n", me, ms, what);
      check(ms < 2000, fmt::format("the abort took {:.0f} ms to arrive", ms));
    }
  }
  // Later calls fail at once too.
  auto start = Clock::now();
  expectError(
      CommError::Kind::Aborted, [&] { comm.barrier(all); }, "aborted: rank 1 failed: boom at",
      start, 0, 100);
  return endCleanly();
}

int sigkillCase(mpi::MpiProcess& process) {
  Communicator& comm = process.communicator();
  if (me == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    auto now = std::chrono::system_clock::now().time_since_epoch();
    fmt::print("rank 1: killing itself at {} ms\n",
               std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
    std::fflush(stdout);
    std::raise(SIGKILL);
  }
  std::vector<int> all;
  for (int d = 0; d < process.size(); ++d) all.push_back(d);
  Tensor t = Tensor::zeros({1000});
  comm.allReduce(all, {&t});  // mpirun ends this process first
  check(false, "the all-reduce with a killed member returned");
  return 1;
}

int sigstopCase(mpi::MpiProcess& process) {
  Communicator& comm = process.communicator();
  if (me == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::raise(SIGSTOP);
    return 1;  // not reached: the others end the job
  }
  double limit = static_cast<double>(process.options().timeout.count());
  auto start = Clock::now();
  Tensor t = Tensor::zeros({1000});
  if (me == 0)
    expectError(
        CommError::Kind::Timeout,
        [&] {
          comm.allReduce({0, 1}, {&t});
        },
        "allReduce #0 over group [0, 1] timed out after 2 s, waiting for device 1", start, limit,
        limit + 5000);
  else
    expectError(
        CommError::Kind::Timeout, [&] { comm.recv(1, 3); },
        fmt::format("device {}: recv from device 1 (tag 3) timed out after 2 s", me), start, limit,
        limit + 5000);
  if (me != 0) {
    process.sendControl(0, failures ? "FAIL" : "ok");
    std::this_thread::sleep_for(std::chrono::seconds(30));  // rank 0 ends the job
    return 1;
  }
  for (int r = 2; r < process.size(); ++r)
    check(process.recvControl(r) == "ok", fmt::format("rank {}'s checks", r));
  fmt::print("rank 0: every other rank timed out naming device 1; terminating the job\n");
  std::fflush(stdout);
  process.terminate(failures ? 1 : 42);
}

}  // namespace

int main(int argc, char** argv) {
  std::string which = "operations";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--case=", 7) == 0) which = argv[i] + 7;
  mpi::MpiOptions options;
  options.timeout = std::chrono::milliseconds(which == "timeout"   ? 1500
                                              : which == "sigstop" ? 2000
                                                                   : 60000);
  mpi::MpiProcess process(&argc, &argv, options);
  me = process.rank();
  try {
    if (which == "timeout") return timeoutCase(process);
    if (which == "abort") return abortCase(process);
    if (which == "sigkill") return sigkillCase(process);
    if (which == "sigstop") return sigstopCase(process);
    auto start = Clock::now();
    checkOperations(process);
    if (me == 0)
      fmt::print("rank 0: every operation checked in {:.0f} ms (node slots {})\n",
                 millisSince(start), process.postsOnNode() ? "on" : "off");
  } catch (const std::exception& e) {
    check(false, std::string("uncaught: ") + e.what());
    process.abort(e.what());
    process.terminate(1);
  }
  std::fflush(stdout);
  return failures ? 1 : 0;
}
