// bench_cuda_gemm: the GPU's GEMM rate through meshflow's cuBLAS wrapper
// (runtime/cuda/Gemm.h), square row-major products in bf16 and f16 (tensor
// cores, fp32 accumulation) and fp32 (no TF32), in TFLOP/s — the denominator
// of the model-FLOP/s share the cuda backend's benchmark will report.
// Usage: bench_cuda_gemm [size...]   (default 4096 8192)
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "runtime/HalfFloat.h"
#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/DeviceProbe.h"
#include "runtime/cuda/Gemm.h"

namespace cuda = meshflow::runtime::cuda;

namespace {

// Random operands: a GPU multiplying zeros draws less power and runs faster
// than on real data.
void* randomOperand(std::int64_t elements, cuda::GemmType type, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> values(static_cast<std::size_t>(elements));
  for (float& v : values) v = dist(rng);
  void* device = nullptr;
  if (type == cuda::GemmType::kF32) {
    MESHFLOW_CUDA_CHECK(cudaMalloc(&device, values.size() * 4));
    MESHFLOW_CUDA_CHECK(cudaMemcpy(device, values.data(), values.size() * 4, cudaMemcpyHostToDevice));
    return device;
  }
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    bits[i] = type == cuda::GemmType::kBF16 ? meshflow::runtime::toBFloat16(values[i]).bits
                                            : meshflow::runtime::toHalf(values[i]).bits;
  MESHFLOW_CUDA_CHECK(cudaMalloc(&device, bits.size() * 2));
  MESHFLOW_CUDA_CHECK(cudaMemcpy(device, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice));
  return device;
}

double teraflops(cuda::GemmType type, std::int64_t size, std::mt19937& rng) {
  cuda::GemmShape shape{.m = size, .n = size, .k = size};
  void* a = randomOperand(size * size, type, rng);
  void* b = randomOperand(size * size, type, rng);
  void* y = nullptr;
  MESHFLOW_CUDA_CHECK(cudaMalloc(&y, size * size * (type == cuda::GemmType::kF32 ? 4 : 2)));
  cuda::Gemm gemm;
  for (int i = 0; i < 3; ++i) gemm.run(shape, type, a, b, y);  // warm-up: cuBLAS picks its kernel
  cudaEvent_t start, stop;
  MESHFLOW_CUDA_CHECK(cudaEventCreate(&start));
  MESHFLOW_CUDA_CHECK(cudaEventCreate(&stop));
  // About half a second of work per measurement on an H100.
  const int iterations = size >= 8192 ? (type == cuda::GemmType::kF32 ? 5 : 30) : 50;
  MESHFLOW_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iterations; ++i) gemm.run(shape, type, a, b, y);
  MESHFLOW_CUDA_CHECK(cudaEventRecord(stop));
  MESHFLOW_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  MESHFLOW_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaFree(a);
  cudaFree(b);
  cudaFree(y);
  return 2.0 * double(size) * size * size * iterations / (ms * 1e-3) / 1e12;
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda::deviceCount() == 0) {
    std::printf("SKIPPED: no CUDA device (%s)\n", cuda::noDeviceReason().c_str());
    return 0;
  }
  std::vector<std::int64_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::atoll(argv[i]));
  if (sizes.empty()) sizes = {4096, 8192};
  try {
    cuda::DeviceInfo info = cuda::deviceInfo(0);
    std::printf("bench_cuda_gemm on %s (sm_%d%d, %d SMs, %.1f GiB)\n", info.name.c_str(), info.computeMajor,
                info.computeMinor, info.multiprocessors, double(info.totalMemory) / (1 << 30));
    std::printf("%-6s %8s %10s\n", "type", "m=n=k", "TFLOP/s");
    std::mt19937 rng(1);
    const struct {
      const char* name;
      cuda::GemmType type;
    } types[] = {{"bf16", cuda::GemmType::kBF16}, {"f16", cuda::GemmType::kF16}, {"fp32", cuda::GemmType::kF32}};
    for (auto t : types)
      for (std::int64_t size : sizes) std::printf("%-6s %8lld %10.1f\n", t.name, static_cast<long long>(size),
                                                  teraflops(t.type, size, rng));
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return 0;
}
