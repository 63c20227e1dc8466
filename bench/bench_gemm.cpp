// Single-thread sgemm throughput of the CPU backend (runtime/cpu/Sgemm.h):
// GFLOP/s of meshflow's own AVX-512 kernel and of OpenBLAS on one thread, side
// by side, for square sizes and for the GEMM shapes of the wide GPT that
// bench/pytorch trains (1,024 tokens, hidden 512) in the three forms a
// training step runs them (y = x·w, dx = dy·wᵀ, dw = xᵀ·dy). The two are
// measured in alternating rounds and each figure is the median of the rounds,
// since the machine is shared. It also gives the rate the cost model should
// use for one CPU device (cpu(peak = ...)).
//
// Usage: bench_gemm [SECONDS_PER_MEASUREMENT]   (default 0.2; 3 rounds)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/cpu/Sgemm.h"

namespace cpu = meshflow::runtime::cpu;
using cpu::GemmShape;

namespace {

struct Case {
  GemmShape shape;
  const char* label;
};

using Gemm = void (*)(const float*, const float*, float*, const GemmShape&);

void own(const float* a, const float* b, float* y, const GemmShape& s) {
  cpu::ownSgemm(a, b, y, s);
}

// Runs `gemm` until `seconds` have passed; returns GFLOP/s.
double measure(Gemm gemm, const Case& c, double seconds) {
  const GemmShape& s = c.shape;
  auto a = meshflow::runtime::randomNormal({s.m * s.k}, 1);
  auto b = meshflow::runtime::randomNormal({s.k * s.n}, 2);
  std::vector<float> y(static_cast<std::size_t>(s.m * s.n));
  gemm(a.f32().data(), b.f32().data(), y.data(), s);  // warm up (packing buffers, OpenBLAS threads)
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  long runs = 0;
  double elapsed = 0;
  do {
    gemm(a.f32().data(), b.f32().data(), y.data(), s);
    ++runs;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return 2.0 * static_cast<double>(s.m * s.n * s.k) * static_cast<double>(runs) / elapsed / 1e9;
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  return xs[xs.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 0.2;
  const int rounds = 3;
  const std::vector<Case> cases = {
      {{128, 128, 128}, "square"},
      {{512, 512, 512}, "square"},
      {{1024, 1024, 1024}, "square"},
      {{1024, 1536, 512}, "wide GPT qkv: x·w"},
      {{1024, 512, 1536, false, true}, "wide GPT qkv: dy·wᵀ"},
      {{512, 1536, 1024, true, false}, "wide GPT qkv: xᵀ·dy"},
      {{1024, 2048, 512}, "wide GPT fc1: x·w"},
      {{1024, 512, 2048}, "wide GPT fc2: x·w"},
      {{1024, 2048, 512, false, true}, "wide GPT fc2: dy·wᵀ"},
      {{2048, 512, 1024, true, false}, "wide GPT fc2: xᵀ·dy"},
      {{64, 64, 64}, "wide GPT attention, one head"},
  };
  float probe = 0, one = 1;
  const bool hasOwn = cpu::ownSgemm(&one, &one, &probe, {1, 1, 1});
  fmt::print("sgemm in use: {}; {} rounds, median GFLOP/s{}\n", cpu::sgemmImplementation(), rounds,
             hasOwn ? "" : " (no AVX-512: the own kernel cannot run here)");
  fmt::print("{:>5} {:>5} {:>5} {:>2} {:>2}  {:>8} {:>8} {:>6}  {}\n", "m", "n", "k", "ta", "tb",
             "own", "openblas", "ratio", "shape");
  for (const Case& c : cases) {
    std::vector<double> ownRates, blasRates;
    for (int r = 0; r < rounds; ++r) {
      if (hasOwn) ownRates.push_back(measure(own, c, seconds));
      blasRates.push_back(measure(cpu::openblasSgemm, c, seconds));
    }
    const double blas = median(blasRates), mine = hasOwn ? median(ownRates) : 0;
    const GemmShape& s = c.shape;
    fmt::print("{:>5} {:>5} {:>5} {:>2} {:>2}  {:>8.1f} {:>8.1f} {:>6.2f}  {}\n", s.m, s.n, s.k,
               int(s.transposeA), int(s.transposeB), mine, blas, mine / blas, c.label);
  }
  return 0;
}
