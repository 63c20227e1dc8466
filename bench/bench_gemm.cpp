// Single-thread sgemm throughput of the CPU backend's MatMul kernel (OpenBLAS
// limited to one thread, as each virtual device runs it): GFLOP/s for square
// sizes and for the GEMM shapes of a small GPT layer. It measures the number the
// cost model should use for one CPU device.
//
// Usage: bench_gemm [SECONDS_PER_SIZE]   (default 0.5)
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"

using meshflow::runtime::Tensor;
namespace cpu = meshflow::runtime::cpu;

namespace {

struct Size {
  std::int64_t m, n, k;
  const char* label;
};

// Runs y = a · b until `seconds` have passed; returns GFLOP/s.
double measure(const Size& size, double seconds) {
  Tensor a = meshflow::runtime::randomNormal({size.m, size.k}, 1);
  Tensor b = meshflow::runtime::randomNormal({size.k, size.n}, 2);
  Tensor y;
  meshflow::ir::Op op{meshflow::ir::OpKind::MatMul, {}, {}, {}, "", {}, {}, {}};
  std::vector<const Tensor*> in = {&a, &b};
  std::vector<Tensor*> out = {&y};
  cpu::runKernel(op, in, out, {});  // warm up (and limit OpenBLAS to one thread)
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  long runs = 0;
  double elapsed = 0;
  do {
    cpu::runKernel(op, in, out, {});
    ++runs;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  double flops = 2.0 * static_cast<double>(size.m * size.n * size.k) * static_cast<double>(runs);
  return flops / elapsed / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 0.5;
  std::vector<Size> sizes = {
      {64, 64, 64, "square"},       {128, 128, 128, "square"},
      {256, 256, 256, "square"},    {512, 512, 512, "square"},
      {1024, 1024, 1024, "square"}, {2048, 768, 768, "gpt qkv/proj (tokens x h x h)"},
      {2048, 3072, 768, "gpt fc1"}, {2048, 768, 3072, "gpt fc2"},
  };
  fmt::print("{:>6} {:>6} {:>6}  {:>8}  {}\n", "m", "n", "k", "GFLOP/s", "shape");
  for (const auto& size : sizes)
    fmt::print("{:>6} {:>6} {:>6}  {:>8.1f}  {}\n", size.m, size.n, size.k, measure(size, seconds),
               size.label);
  return 0;
}
