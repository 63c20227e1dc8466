// What the GPU checks (test_cuda_kernels, test_cuda_ops) share: fresh random
// inputs (the seed printed; MESHFLOW_SEED=<n> repeats a run), the cpu kernel
// as the reference, one line per check, and the skip without a GPU.
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/DeviceProbe.h"

namespace meshflow::gpu_check {

using meshflow::ir::DType;
using meshflow::ir::OpKind;
using meshflow::runtime::Shape;
using meshflow::runtime::Tensor;
namespace cpu = meshflow::runtime::cpu;
namespace cuda = meshflow::runtime::cuda;

inline std::mt19937_64 rng;

inline Tensor randomTensor(Shape shape, float low = -3.0f, float high = 3.0f) {
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> values(static_cast<std::size_t>(meshflow::runtime::shapeElements(shape)));
  for (float& v : values) v = dist(rng);
  return Tensor::fromF32(std::move(shape), std::move(values));
}

// Runs one cpu kernel, as the executor does.
inline Tensor runCpu(OpKind kind, std::vector<const Tensor*> inputs, meshflow::ir::Attributes attrs = {}) {
  meshflow::ir::Op op;
  op.kind = kind;
  op.attrs = std::move(attrs);
  Tensor out;
  std::vector<Tensor*> outputs{&out};
  cpu::runKernel(op, inputs, outputs, cpu::KernelContext{});
  return out;
}

struct Tolerance {
  double atol = 0, rtol = 0;
};

inline int failures = 0;

// Compares element by element; prints one line per check.
inline void expectClose(const std::string& name, const Tensor& gpu, const Tensor& cpuResult, Tolerance tol) {
  const auto wide = [](const Tensor& t) {  // i32 results (ids) compare as floats: exact below 2^24
    if (t.dtype() != DType::I32) return t.toF32();
    std::vector<float> values(t.i32().begin(), t.i32().end());
    return Tensor::fromF32(t.shape(), std::move(values));
  };
  Tensor g = wide(gpu), c = wide(cpuResult);
  bool ok = g.shape() == c.shape();
  double worst = 0, worstDiff = 0;
  std::int64_t worstAt = -1;
  bool nonzero = false;
  if (ok)
    for (std::size_t i = 0; i < g.f32().size(); ++i) {
      double a = g.f32()[i], b = c.f32()[i];
      nonzero = nonzero || b != 0;
      double diff = std::fabs(a - b);
      double ratio = diff / (tol.atol + tol.rtol * std::fabs(b));
      if (!(diff == 0 || ratio <= 1)) ok = false;  // NaN fails too
      if (diff > 0 && !(ratio <= worst)) {
        worst = ratio;
        worstDiff = diff;
        worstAt = static_cast<std::int64_t>(i);
      }
    }
  ok = ok && nonzero;  // a check on all-zero results checks nothing
  if (!ok) ++failures;
  std::printf("%-4s %-44s %-16s max |diff| %.3g (%.2f of tolerance)%s\n", ok ? "ok" : "FAIL", name.c_str(),
              c.typeText().c_str(), worstDiff, worst,
              !ok && worstAt >= 0 ? (" at element " + std::to_string(worstAt)).c_str() : "");
}


/// ctest's SKIP_RETURN_CODE for the gpu.* tests (tests/gpu/Gpu.cmake).
constexpr int kSkipped = 77;

/// Without a GPU: prints SKIPPED and answers false (exit kSkipped). Else seeds
/// the inputs, prints the card and the seed and answers true.
inline bool startChecks(const char* program) {
  if (cuda::deviceCount() == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", cuda::noDeviceReason().c_str());
    return false;
  }
  cuda::DeviceInfo info = cuda::deviceInfo(0);
  std::uint64_t seed = std::random_device{}();
  if (const char* given = std::getenv("MESHFLOW_SEED")) seed = std::strtoull(given, nullptr, 10);
  rng.seed(seed);
  std::printf("%s on %s (sm_%d%d, %.1f GiB), seed %llu (MESHFLOW_SEED=%llu repeats it)\n", program, info.name.c_str(),
              info.computeMajor, info.computeMinor, double(info.totalMemory) / (1 << 30),
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(seed));
  return true;
}

/// The exit status after the checks.
inline int finishChecks(const char* what) {
  std::printf("%s\n", failures == 0 ? (std::string("all ") + what + " passed").c_str()
                                     : (std::string("some ") + what + " FAILED").c_str());
  return failures == 0 ? 0 : 1;
}

}  // namespace meshflow::gpu_check
