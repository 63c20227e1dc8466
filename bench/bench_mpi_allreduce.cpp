// The MPI communicator's all-reduce against a plain MPI_Allreduce of the same
// bytes, in one run so both see the same machine and load:
//
//   mpirun -np 4 build/bench/bench_mpi_allreduce [--max-mib 64 | --max-kib K] [--seconds 0.3]
//
// For each size (f32, 1 KiB .. 64 MiB) it times, in alternating rounds, the
// deterministic allReduce (reduce-scatter + all-gather in group order),
// allReduce with deterministic = false (MPI_Iallreduce on a communicator of
// the group), and MPI_Allreduce on MPI_COMM_WORLD. A round's time is the
// slowest rank's; the figure is the median round. Bus bandwidth is
// 2 (n - 1) / n * bytes / time, as NCCL's tests print it; the ratio is the
// communicator's bandwidth over MPI_Allreduce's (target >= 0.8), of the
// median rounds and of the best rounds (on a loaded machine the best round is
// the one least disturbed). Results are allocated as a device executor
// allocates them: from a DeviceMemory, which reuses freed blocks.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/memory/DeviceMemory.h"
#include "runtime/mpi/MpiProcess.h"

using namespace meshflow::runtime;

namespace {

using Clock = std::chrono::steady_clock;

// The slowest rank's seconds for `body`.
template <class Body>
double timed(Body body) {
  MPI_Barrier(MPI_COMM_WORLD);
  auto start = Clock::now();
  body();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count(), slowest = 0;
  MPI_Allreduce(&seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  mpi::MpiProcess process(&argc, &argv);
  std::size_t maxBytes = std::size_t(64) << 20;
  double budget = 0.3;  // seconds of timing per method and size
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--max-mib") == 0) maxBytes = std::stoull(argv[i + 1]) << 20;
    if (std::strcmp(argv[i], "--max-kib") == 0) maxBytes = std::stoull(argv[i + 1]) << 10;
    if (std::strcmp(argv[i], "--seconds") == 0) budget = std::stod(argv[i + 1]);
  }
  int n = process.size();
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  Communicator& comm = process.communicator();
  MemoryScope scope(std::make_shared<DeviceMemory>(process.rank(), 0),
                    MemoryCategory::kCommunication);
  if (process.rank() == 0) {
    fmt::print(
        "all-reduce of f32 over {} ranks: bus bandwidth in GB/s of the median round "
        "(slowest rank), ratios of the median and of the best rounds\n",
        n);
    fmt::print("{:>10} {:>6} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7}\n", "bytes", "rounds", "meshflow",
               "MPI", "loose", "ratio", "best", "loose");
  }
  for (std::size_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
    auto elements = static_cast<std::int64_t>(bytes / 4);
    Tensor ours = randomNormal({elements}, 7 + static_cast<std::uint64_t>(process.rank()));
    std::vector<float> plain(ours.f32().begin(), ours.f32().end()), sum(plain.size());
    mpi::MpiOptions options = process.options();
    auto deterministic = [&] {
      options.deterministic = true;
      process.setOptions(options);
      Tensor t = ours;
      comm.allReduce(all, {&t});
    };
    auto loose = [&] {
      options.deterministic = false;
      process.setOptions(options);
      Tensor t = ours;
      comm.allReduce(all, {&t});
    };
    auto reference = [&] {
      MPI_Allreduce(plain.data(), sum.data(), static_cast<int>(elements), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
    };
    // Warm up (and make the group's communicator), then size the rounds.
    deterministic();
    loose();
    reference();
    double once = timed(deterministic);
    int repeat = std::max(1, static_cast<int>(0.02 / std::max(once, 1e-7)));
    int rounds = std::clamp(static_cast<int>(budget / std::max(once * repeat, 1e-7)), 5, 200);
    std::vector<double> a, b, c;
    for (int round = 0; round < rounds; ++round) {
      a.push_back(timed([&] {
                    for (int i = 0; i < repeat; ++i) deterministic();
                  }) /
                  repeat);
      b.push_back(timed([&] {
                    for (int i = 0; i < repeat; ++i) reference();
                  }) /
                  repeat);
      c.push_back(timed([&] {
                    for (int i = 0; i < repeat; ++i) loose();
                  }) /
                  repeat);
    }
    double bus = 2.0 * (n - 1) / n * static_cast<double>(bytes) / 1e9;
    double ta = median(a), tb = median(b), tc = median(c);
    double best = *std::min_element(b.begin(), b.end()) / *std::min_element(a.begin(), a.end());
    if (process.rank() == 0)
      fmt::print("{:>10} {:>6} {:>9.3f} {:>9.3f} {:>9.3f} {:>7.2f} {:>7.2f} {:>7.2f}\n", bytes,
                 rounds, bus / ta, bus / tb, bus / tc, tb / ta, best, tb / tc);
    options.deterministic = true;
    process.setOptions(options);
  }
  if (process.rank() == 0)
    fmt::print(
        "meshflow: deterministic allReduce; MPI: MPI_Allreduce; loose: allReduce with "
        "deterministic = false;\nratio, best: MPI's time / meshflow's (median, best rounds); "
        "loose: MPI's time / loose's (median)\n");
  return 0;
}
