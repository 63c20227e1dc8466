// test_cuda_kernels: each CUDA kernel and cuBLAS GEMM of runtime/cuda/ against
// the cpu kernel it stands in for (runtime/cpu/), on fresh random inputs each
// run (the seed is printed; MESHFLOW_SEED=<n> repeats a run), to the tolerance
// of its precision. Without a GPU it prints "SKIPPED: no CUDA device" and
// exits 77, which ctest reports as skipped (not passed); CI builds and runs
// it everywhere, and it can fail only where a GPU is. Exits 1 if any check
// fails.
//
// Tolerances, as |gpu - cpu| <= atol + rtol·|cpu| per element:
// - add, mul, relu, relu_grad: exact (one fp32 rounding on both sides);
// - gelu, gelu_grad, softmax, layer norm: a few fp32 ulp (CUDA's tanhf/expf
//   against the cpu kernels' own approximations, sums in another order),
//   scaled by how much each output amplifies them (see checkElementwise);
// - fp32 GEMM: sums of k products in another order;
// - bf16 and f16 GEMM: the rounding of the output to the type (the inputs
//   are rounded to it on both sides, the sums run in fp32 on both).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ir/Bytes.h"
#include "runtime/Tensor.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceProbe.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/Kernels.h"
#include "tests/gpu/Parity.h"

namespace {

using namespace meshflow::gpu_check;
using meshflow::runtime::DeviceMemory;
using meshflow::runtime::MemoryCategory;

// A device copy of a host tensor, from the checked allocator.
class DeviceTensor {
 public:
  DeviceTensor(std::shared_ptr<DeviceMemory> memory, std::size_t bytes)
      : memory_(std::move(memory)), bytes_(bytes), block_(memory_->allocate(bytes, MemoryCategory::kActivations)) {}
  DeviceTensor(std::shared_ptr<DeviceMemory> memory, const Tensor& host) : DeviceTensor(memory, host.bytes()) {
    MESHFLOW_CUDA_CHECK(cudaMemcpy(block_.data, host.raw().data(), bytes_, cudaMemcpyHostToDevice));
  }
  ~DeviceTensor() { memory_->release(block_, bytes_, MemoryCategory::kActivations); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  float* f32() const { return static_cast<float*>(block_.data); }
  void* data() const { return block_.data; }
  /// The elements as a host tensor of `dtype` and `shape`.
  Tensor download(DType dtype, Shape shape) const {
    Tensor host = Tensor::uninitialized(dtype, std::move(shape));
    MESHFLOW_CUDA_CHECK(cudaDeviceSynchronize());
    MESHFLOW_CUDA_CHECK(cudaMemcpy(host.raw().data(), block_.data, host.bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  std::shared_ptr<DeviceMemory> memory_;
  std::size_t bytes_;
  DeviceMemory::Block block_;
};

void checkElementwise(const std::shared_ptr<DeviceMemory>& memory) {
  const cuda::Stream s = nullptr;
  Tensor a = randomTensor({37, 129}), b = randomTensor({37, 129}), bias = randomTensor({129});
  DeviceTensor da(memory, a), db(memory, b), dbias(memory, bias), dy(memory, a.bytes());
  cuda::add(da.f32(), db.f32(), dy.f32(), a.elements(), b.elements(), s);
  expectClose("add", dy.download(DType::F32, a.shape()), runCpu(OpKind::Add, {&a, &b}), {});
  cuda::add(da.f32(), dbias.f32(), dy.f32(), a.elements(), bias.elements(), s);
  expectClose("add (bias over rows)", dy.download(DType::F32, a.shape()), runCpu(OpKind::Add, {&a, &bias}), {});
  cuda::mul(da.f32(), db.f32(), dy.f32(), a.elements(), b.elements(), s);
  expectClose("mul", dy.download(DType::F32, a.shape()), runCpu(OpKind::Mul, {&a, &b}), {});
  cuda::mul(da.f32(), dbias.f32(), dy.f32(), a.elements(), bias.elements(), s);
  expectClose("mul (bias over rows)", dy.download(DType::F32, a.shape()), runCpu(OpKind::Mul, {&a, &bias}), {});

  cuda::relu(da.f32(), dy.f32(), a.elements(), s);
  expectClose("relu", dy.download(DType::F32, a.shape()), runCpu(OpKind::Relu, {&a}), {});
  cuda::reluGrad(da.f32(), db.f32(), dy.f32(), a.elements(), s);
  expectClose("relu_grad", dy.download(DType::F32, a.shape()), runCpu(OpKind::ReluGrad, {&a, &b}), {});

  // Large enough that the grid-stride loops go round more than once.
  Tensor x = randomTensor({1 << 22}, -6.0f, 6.0f), g = randomTensor({1 << 22});
  DeviceTensor dx(memory, x), dg(memory, g), dout(memory, x.bytes());
  // The two tanh differ by a few ulp of 1 (δt ≈ 2.4e-7); GeLU multiplies δt
  // by x/2 (≤ 3 here), its gradient by dy·(1/2 + x·t·C·(1 + 3A·x²)) (≤ 3·28):
  // hence 2e-6 and 2e-5 absolute. (fastTanh against std::tanh on the host:
  // at most 4.8e-7 and 3.3e-6 over 4M such inputs.)
  cuda::gelu(dx.f32(), dout.f32(), x.elements(), s);
  expectClose("gelu", dout.download(DType::F32, x.shape()), runCpu(OpKind::Gelu, {&x}), {2e-6, 1e-5});
  cuda::geluGrad(dx.f32(), dg.f32(), dout.f32(), x.elements(), s);
  expectClose("gelu_grad", dout.download(DType::F32, x.shape()), runCpu(OpKind::GeluGrad, {&x, &g}),
              {2e-5, 1e-5});
}

void checkRows(const std::shared_ptr<DeviceMemory>& memory) {
  const cuda::Stream s = nullptr;
  Tensor x = randomTensor({64, 1000}, -8.0f, 8.0f);
  DeviceTensor dx(memory, x), dy(memory, x.bytes());
  cuda::softmax(dx.f32(), dy.f32(), 64, 1000, 1.0f, false, s);
  expectClose("softmax", dy.download(DType::F32, x.shape()), runCpu(OpKind::Softmax, {&x}), {1e-9, 1e-5});

  // Attention scores [batch, heads, s, s]: the cpu graph's Scale, CausalMask, Softmax.
  const std::int64_t seq = 77;
  const float scale = 0.125f;
  Tensor scores = randomTensor({2, 3, seq, seq}, -20.0f, 20.0f);
  DeviceTensor ds(memory, scores), dp(memory, scores.bytes());
  cuda::softmax(ds.f32(), dp.f32(), 2 * 3 * seq, seq, scale, true, s);
  Tensor scaled = runCpu(OpKind::Scale, {&scores}, {{"factor", double(scale)}});
  Tensor masked = runCpu(OpKind::CausalMask, {&scaled});
  expectClose("softmax (scale 0.125, causal mask)", dp.download(DType::F32, scores.shape()),
              runCpu(OpKind::Softmax, {&masked}), {1e-9, 1e-5});

  Tensor h = randomTensor({33, 768}), gamma = randomTensor({768}), beta = randomTensor({768});
  DeviceTensor dh(memory, h), dgamma(memory, gamma), dbeta(memory, beta), dn(memory, h.bytes());
  cuda::layerNorm(dh.f32(), dgamma.f32(), dbeta.f32(), dn.f32(), 33, 768, 1e-5, s);
  expectClose("layer_norm", dn.download(DType::F32, h.shape()),
              runCpu(OpKind::LayerNorm, {&h, &gamma, &beta}, {{"eps", 1e-5}}), {1e-5, 1e-5});
}

struct GemmCase {
  std::string name;
  Shape a, b;
  cuda::GemmShape shape;
};

void checkGemms(const std::shared_ptr<DeviceMemory>& memory) {
  cuda::Gemm gemm;
  // Sizes that are no multiple of a tile, so every edge path runs.
  const std::int64_t m = 67, n = 45, k = 129;
  std::vector<GemmCase> cases = {
      {"[m,k] x [k,n]", {m, k}, {k, n}, {.m = m, .n = n, .k = k}},
      {"[m,k] x [n,k] (b transposed)", {m, k}, {n, k}, {.m = m, .n = n, .k = k, .transB = true}},
      {"[k,m] x [k,n] (a transposed)", {k, m}, {k, n}, {.m = m, .n = n, .k = k, .transA = true}},
      {"[k,m] x [n,k] (both transposed)", {k, m}, {n, k}, {.m = m, .n = n, .k = k, .transA = true, .transB = true}},
      {"[3,m,k] x [k,n] (shared b)", {3, m, k}, {k, n}, {.batch = 3, .m = m, .n = n, .k = k, .sharedB = true}},
      {"[3,k,m] x [k,n] (a transposed, shared b)", {3, k, m}, {k, n},
       {.batch = 3, .m = m, .n = n, .k = k, .transA = true, .sharedB = true}},
      {"[3,m,k] x [3,n,k] (batched, b transposed)", {3, m, k}, {3, n, k},
       {.batch = 3, .m = m, .n = n, .k = k, .transB = true}},
  };
  struct Precision {
    const char* name;
    DType dtype;
    cuda::GemmType type;
    double rtol;
  };
  // fp32: k products summed in another order; bf16 (8 significant bits) and
  // f16 (11): twice the rounding of the output.
  const Precision precisions[] = {{"f32", DType::F32, cuda::GemmType::kF32, 1e-5},
                                  {"bf16", DType::BF16, cuda::GemmType::kBF16, 2.0 / 256},
                                  {"f16", DType::F16, cuda::GemmType::kF16, 2.0 / 2048}};
  for (const Precision& p : precisions)
    for (const GemmCase& c : cases) {
      // Both sides start from the inputs rounded to the type, as the cpu
      // backend's widened matmul does.
      Tensor a = randomTensor(c.a, -1.0f, 1.0f).castTo(p.dtype), b = randomTensor(c.b, -1.0f, 1.0f).castTo(p.dtype);
      Tensor aw = a.toF32(), bw = b.toF32();
      Tensor expected = runCpu(OpKind::MatMul, {&aw, &bw},
                               {{"transpose_a", std::int64_t{c.shape.transA}}, {"transpose_b", std::int64_t{c.shape.transB}}});
      DeviceTensor da(memory, a), db(memory, b), dy(memory, expected.elements() * meshflow::ir::dtypeBytes(p.dtype));
      gemm.run(c.shape, p.type, da.data(), db.data(), dy.data());
      // A sum of k products of about 1/3 in another order: rounding errors of
      // ~1e-7 each, a random walk of sqrt(k) steps (~1e-6), 4e-6·sqrt(k) is
      // some 9 of its standard deviations. A wrong transpose or stride is O(1).
      expectClose(std::string("gemm ") + p.name + " " + c.name, dy.download(p.dtype, expected.shape()), expected,
                  {4e-6 * std::sqrt(double(k)), p.rtol});
    }
}

// The allocator's accounting on real device memory: reuse from the cache and
// the limit's error naming the CUDA device.
void checkAllocator() {
  auto memory = cuda::makeDeviceMemory(0, 0, 64 << 20);
  auto a = memory->allocate(40 << 20, MemoryCategory::kParameters);
  memory->release(a, 40 << 20, MemoryCategory::kParameters);
  auto b = memory->allocate(40 << 20, MemoryCategory::kGradients);
  bool ok = b.data == a.data && memory->stats().reused == 1 && memory->stats().peak == (40 << 20);
  std::string error;
  try {
    memory->allocate(30 << 20, MemoryCategory::kActivations);
  } catch (const meshflow::runtime::DeviceMemoryError& e) {
    error = e.what();
  }
  ok = ok && error.find("out of memory on device 0") != std::string::npos &&
       error.find("holding gradients " + meshflow::ir::formatBytes(40 << 20)) != std::string::npos;
  memory->release(b, 40 << 20, MemoryCategory::kGradients);
  if (!ok) ++failures;
  std::printf("%-4s %-44s %s\n", ok ? "ok" : "FAIL", "device allocator: reuse and limit", error.c_str());
}

}  // namespace

int main() {
  if (!startChecks("test_cuda_kernels")) return kSkipped;
  try {
    auto memory = cuda::makeDeviceMemory(0, 0, 0);
    checkAllocator();
    checkElementwise(memory);
    checkRows(memory);
    checkGemms(memory);
    auto stats = memory->stats();
    std::printf("device memory: peak %lld bytes, %lld allocations, %lld from the cache\n",
                static_cast<long long>(stats.peak), static_cast<long long>(stats.allocations),
                static_cast<long long>(stats.reused));
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return finishChecks("CUDA kernel checks");
}
