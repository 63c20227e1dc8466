// test_cuda_ops' fused attention (runtime/cuda/AttentionKernels.h): the
// forward (out, lse) and the backward (dq, dk, dv, from the GPU forward's
// lse) through CudaKernels on fresh random q, k, v and dOut in [-1, 1), in
// f32, bf16 and f16, for several heads causal, grouped queries (r = 2s and
// 3s) causal, non-causal with r ≠ s, and head dimensions 64, 128 and odd
// ones (37, 100), with sizes that leave partial tiles. Each is checked
// against cpu::fusedAttention / fusedAttentionGrad and against a second run
// of the same kernels, which must give the same bits (no atomics: every sum
// in an order fixed by the sizes).
//
// Tolerances. f32: the kernels compute the same dot products as the cpu
// reference (t ascending, no fused multiply-add), but sum the softmax and the
// gradients in another order (tiles of 16 keys, the output rescaled per tile;
// the row term as 32 lane sums added in a tree) and use CUDA's expf (within 2
// ulp) where the host uses std::exp. Each result is a sum of at most 120
// terms of magnitude below about 4 (|dOut · v| ≤ d, times scale = 1/√d and
// a probability), so summation order moves it by a few hundred f32 ulps of
// that magnitude at the very worst, typically a few: atol 1e-4, rtol 1e-4
// (lse, a log of such a sum, 2e-5 both). f16 and bf16: both sides compute in
// f32 from the same widened operands and round once, so their results differ
// by at most one unit in the last place of the type (2^-10 and 2^-7 of the
// value) on top of the f32 difference.
#include "tests/gpu/AttentionParity.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/KernelBackend.h"
#include "runtime/cpu/FusedAttention.h"
#include "runtime/cuda/AttentionKernels.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/memory/DeviceMemory.h"

namespace meshflow::gpu_check {
namespace {

using meshflow::runtime::MemoryCategory;
using meshflow::runtime::MemoryScope;

struct AttentionCase {
  std::string name;
  Shape q, kv;  ///< [..., r, d] and [..., s, d]
  bool causal = false;
};

std::vector<AttentionCase> attentionCases() {
  return {{"4 heads causal d=64", {2, 4, 40, 64}, {2, 4, 40, 64}, true},
          {"grouped r=2s causal d=128", {2, 2, 48, 128}, {2, 2, 24, 128}, true},
          {"grouped r=3s causal d=37", {1, 3, 60, 37}, {1, 3, 20, 37}, true},
          {"non-causal r!=s d=64", {2, 2, 33, 64}, {2, 2, 50, 64}, false},
          {"non-causal rank 2 d=100", {70, 100}, {70, 100}, false},
          {"causal s=17 (a tile and a key) d=128", {1, 2, 17, 128}, {1, 2, 17, 128}, true}};
}

Tolerance toleranceFor(DType dtype) {
  const double unit = dtype == DType::BF16 ? std::ldexp(1.0, -7) : dtype == DType::F16 ? std::ldexp(1.0, -10) : 0.0;
  return {1e-4, 1e-4 + unit};
}

Tensor randomOf(const Shape& shape, DType dtype) {
  Tensor t = randomTensor(shape, -1.0f, 1.0f);
  return dtype == DType::F32 ? t : t.castTo(dtype);
}

struct GpuRun {
  cpu::AttentionResult forward;
  cpu::AttentionGrads backward;
};

// One forward and backward through the backend, on copies in the GPU's memory.
GpuRun runOnGpu(cuda::CudaKernels& kernels, const std::vector<Tensor>& operands,
                const cpu::AttentionOptions& options) {
  std::vector<Tensor> in;
  for (const Tensor& t : operands) in.push_back(t.clone());
  GpuRun run;
  if (!kernels.attention(in[0], in[1], in[2], options, run.forward))
    throw std::runtime_error("the backend declined the forward");
  if (!kernels.attentionGrad(in[0], in[1], in[2], in[3], run.forward.lse, options, run.backward))
    throw std::runtime_error("the backend declined the backward");
  return run;
}

std::int64_t countOf(const std::map<std::string, std::int64_t>& counts, const std::string& name) {
  return counts.count(name) ? counts.at(name) : 0;
}

void checkOne(cuda::CudaKernels& kernels, const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory,
              const AttentionCase& c, DType dtype) {
  const std::string name = "attention " + c.name + " " + meshflow::ir::dtypeName(dtype);
  const std::vector<Tensor> operands{randomOf(c.q, dtype), randomOf(c.kv, dtype), randomOf(c.kv, dtype),
                                     randomOf(c.q, dtype)};
  const cpu::AttentionOptions options{1.0 / std::sqrt(static_cast<double>(c.q.back())), c.causal};
  const cpu::AttentionResult expected = cpu::fusedAttention(operands[0], operands[1], operands[2], options);
  const cpu::AttentionGrads expectedGrads =
      cpu::fusedAttentionGrad(operands[0], operands[1], operands[2], operands[3], expected.lse, options);
  MemoryScope scope(memory, MemoryCategory::kActivations);
  const auto before = countOf(kernels.gpuOps(), "fused_attention");
  const auto gradsBefore = countOf(kernels.gpuOps(), "fused_attention_grad");
  GpuRun first, second;
  try {
    first = runOnGpu(kernels, operands, options);
    second = runOnGpu(kernels, operands, options);
  } catch (const std::exception& e) {
    ++failures;
    std::printf("FAIL %-44s %s\n", name.c_str(), e.what());
    return;
  }
  if (countOf(kernels.gpuOps(), "fused_attention") != before + 2 ||
      countOf(kernels.gpuOps(), "fused_attention_grad") != gradsBefore + 2) {
    ++failures;
    std::printf("FAIL %-44s not counted as one GPU launch each\n", name.c_str());
    return;
  }
  const Tolerance tol = toleranceFor(dtype);
  expectClose(name + " out", first.forward.out, expected.out, tol);
  expectClose(name + " lse", first.forward.lse, expected.lse, {2e-5, 2e-5});
  expectClose(name + " dq", first.backward.dq, expectedGrads.dq, tol);
  expectClose(name + " dk", first.backward.dk, expectedGrads.dk, tol);
  expectClose(name + " dv", first.backward.dv, expectedGrads.dv, tol);
  const std::vector<std::pair<const char*, std::pair<const Tensor*, const Tensor*>>> repeats{
      {"out", {&first.forward.out, &second.forward.out}},     {"lse", {&first.forward.lse, &second.forward.lse}},
      {"dq", {&first.backward.dq, &second.backward.dq}},      {"dk", {&first.backward.dk, &second.backward.dk}},
      {"dv", {&first.backward.dv, &second.backward.dv}}};
  for (const auto& [what, pair] : repeats)
    expectClose(name + " " + what + " rerun (bits)", *pair.first, *pair.second, {0, 0});
}

// A head dimension over the kernels' bound: the backend declines (counted as
// a host op) and runtime::runAttention gives the cpu reference's bits.
void checkHostFallback(cuda::CudaKernels& kernels, const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory) {
  const std::string name = "attention d over the bound (host)";
  const std::int64_t d = cuda::kMaxAttentionHeadDim + 1;
  const Tensor q = randomOf({2, 8, d}, DType::F32), k = randomOf({2, 8, d}, DType::F32),
               v = randomOf({2, 8, d}, DType::F32);
  const cpu::AttentionOptions options{0.125, true};
  const cpu::AttentionResult expected = cpu::fusedAttention(q, k, v, options);
  MemoryScope scope(memory, MemoryCategory::kActivations);
  const auto hostBefore = countOf(kernels.hostOps(), "fused_attention");
  cpu::AttentionResult actual;
  try {
    const Tensor qd = q.clone(), kd = k.clone(), vd = v.clone();
    meshflow::runtime::KernelScope kernelScope(&kernels);
    actual = meshflow::runtime::runAttention(qd, kd, vd, options);
  } catch (const std::exception& e) {
    ++failures;
    std::printf("FAIL %-44s %s\n", name.c_str(), e.what());
    return;
  }
  if (countOf(kernels.hostOps(), "fused_attention") != hostBefore + 1) {
    ++failures;
    std::printf("FAIL %-44s not counted as a host op\n", name.c_str());
    return;
  }
  expectClose(name + " out", actual.out, expected.out, {0, 0});
  expectClose(name + " lse", actual.lse, expected.lse, {0, 0});
}

}  // namespace

void checkFusedAttention(cuda::CudaKernels& kernels, const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory) {
  for (const AttentionCase& c : attentionCases())
    for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) checkOne(kernels, memory, c, dtype);
  checkHostFallback(kernels, memory);
}

}  // namespace meshflow::gpu_check
