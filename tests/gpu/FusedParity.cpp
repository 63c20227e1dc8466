// test_cuda_ops' fused groups (runtime/FusedOps.h): each pattern through
// CudaKernels::runFused on fresh random inputs, in f32, bf16 and f16, checked
// twice: against the unfused chain of cpu kernels (each precision's
// tolerance: CUDA's expf and tanhf against the cpu's FastMath, a few fp32
// ulp, so a half result may differ by one unit of its last place), and
// against the unfused chain of the backend's own kernels on the GPU, which
// it must equal to the bit (the same operations in the same order).
#include "tests/gpu/FusedParity.h"

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/FusedOps.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/memory/DeviceMemory.h"

namespace meshflow::gpu_check {
namespace {

using meshflow::runtime::FusedGroup;
using meshflow::runtime::FusedPattern;
using meshflow::runtime::MemoryCategory;
using meshflow::runtime::MemoryScope;

struct ChainOp {
  OpKind kind;
  double factor = 0;  ///< Scale's.
  /// Which inputs it reads: -1 the last op's output, k ≥ 0 the group's input k.
  std::vector<int> reads{-1};
};

struct FusedCase {
  std::string name;
  FusedGroup group;
  std::vector<ChainOp> chain;
  std::vector<Tensor> inputs;
  Tolerance tol;
};

// The chain op by op; every op's output (the group's outputs are the last
// op's and, for bias + GeLU, the first's).
std::vector<Tensor> runChain(const FusedCase& c, const std::vector<Tensor>& inputs, cuda::CudaKernels* kernels) {
  std::vector<Tensor> made;
  for (const ChainOp& step : c.chain) {
    meshflow::ir::Op op;
    op.kind = step.kind;
    if (step.kind == OpKind::Scale) op.attrs["factor"] = step.factor;
    std::vector<const Tensor*> in;
    for (int k : step.reads) in.push_back(k < 0 ? &made.back() : &inputs[static_cast<std::size_t>(k)]);
    Tensor y;
    std::vector<Tensor*> out{&y};
    if (kernels) kernels->run(op, in, out, {});
    else cpu::runKernel(op, in, out, {});
    made.push_back(std::move(y));
  }
  return made;
}

// The group's outputs from the chain's op outputs.
std::vector<Tensor> groupOutputs(const FusedCase& c, const std::vector<Tensor>& made) {
  if (c.group.pattern == FusedPattern::kBiasGelu) return {made.front(), made.back()};
  return {made.back()};
}

void checkOne(cuda::CudaKernels& kernels, const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory,
              const FusedCase& c) {
  const std::vector<Tensor> expected = groupOutputs(c, runChain(c, c.inputs, nullptr));
  MemoryScope scope(memory, MemoryCategory::kActivations);
  std::vector<Tensor> deviceInputs;
  for (const Tensor& t : c.inputs) deviceInputs.push_back(t.clone());
  const std::string pattern = meshflow::runtime::fusedPatternName(c.group.pattern);
  const auto before = kernels.gpuOps().count(pattern) ? kernels.gpuOps().at(pattern) : 0;
  std::vector<Tensor> fused(c.group.outputs.size()), unfused;
  try {
    std::vector<const Tensor*> in;
    for (const Tensor& t : deviceInputs) in.push_back(&t);
    std::vector<Tensor*> out;
    for (Tensor& t : fused) out.push_back(&t);
    if (!kernels.runFused(c.group, in, out, {})) {
      ++failures;
      std::printf("FAIL %-44s the backend declined the group\n", c.name.c_str());
      return;
    }
    unfused = groupOutputs(c, runChain(c, deviceInputs, &kernels));
  } catch (const std::exception& e) {
    ++failures;
    std::printf("FAIL %-44s %s\n", c.name.c_str(), e.what());
    return;
  }
  if ((kernels.gpuOps().count(pattern) ? kernels.gpuOps().at(pattern) : 0) != before + 1) {
    ++failures;
    std::printf("FAIL %-44s not counted as one %s launch\n", c.name.c_str(), pattern.c_str());
    return;
  }
  for (std::size_t k = 0; k < fused.size(); ++k) {
    const std::string name = c.name + (fused.size() > 1 ? " output " + std::to_string(k) : "");
    expectClose(name + " vs cpu chain", fused[k], expected[k], c.tol);
    expectClose(name + " vs gpu chain (bits)", fused[k], unfused[k], {0, 0});
  }
}

FusedGroup groupOf(FusedPattern pattern, std::size_t count, double scale, bool causal, std::size_t inputs,
                   std::size_t outputs) {
  FusedGroup g;
  g.pattern = pattern;
  g.count = count;
  g.scale = scale;
  g.causal = causal;
  g.inputs.assign(inputs, 0);
  g.outputs.assign(outputs, 0);
  g.live.assign(outputs, true);
  return g;
}

std::vector<FusedCase> casesIn(DType dtype, Tolerance softmaxTol, Tolerance gradTol, Tolerance geluTol) {
  const std::string type = meshflow::ir::dtypeName(dtype);
  const double factor = 0.3535533905932738;  // 1 / sqrt(8): not a power of 2, so a half product rounds
  const auto half = [dtype](Tensor t) { return t.castTo(dtype); };
  std::vector<FusedCase> cases;
  const Tensor scores = half(randomTensor({2, 3, 37, 37}, -8.0f, 8.0f));
  cases.push_back({"fused scale+causal_mask+softmax " + type, groupOf(FusedPattern::kSoftmax, 3, factor, true, 1, 1),
                   {{OpKind::Scale, factor}, {OpKind::CausalMask}, {OpKind::Softmax}}, {scores}, softmaxTol});
  cases.push_back({"fused scale+softmax " + type, groupOf(FusedPattern::kSoftmax, 2, factor, false, 1, 1),
                   {{OpKind::Scale, factor}, {OpKind::Softmax}}, {scores}, softmaxTol});
  // y a causal softmax's (zero above the diagonal), as the backward reads it.
  const Tensor y = runCpu(OpKind::Softmax, {&scores});
  const Tensor masked = runCpu(OpKind::CausalMask, {&scores});
  const Tensor maskedY = runCpu(OpKind::Softmax, {&masked});
  const Tensor dy = half(randomTensor({2, 3, 37, 37}));
  cases.push_back({"fused softmax_grad+causal_mask_grad+scale " + type,
                   groupOf(FusedPattern::kSoftmaxGrad, 3, factor, true, 2, 1),
                   {{OpKind::SoftmaxGrad, 0, {0, 1}}, {OpKind::CausalMaskGrad}, {OpKind::Scale, factor}},
                   {maskedY, dy}, gradTol});
  cases.push_back({"fused softmax_grad+scale " + type, groupOf(FusedPattern::kSoftmaxGrad, 2, factor, false, 2, 1),
                   {{OpKind::SoftmaxGrad, 0, {0, 1}}, {OpKind::Scale, factor}}, {y, dy}, gradTol});
  const Tensor x = half(randomTensor({4, 33, 96}, -4.0f, 4.0f)), bias = half(randomTensor({96}));
  cases.push_back({"fused add(bias)+gelu " + type, groupOf(FusedPattern::kBiasGelu, 2, 1.0, false, 2, 2),
                   {{OpKind::Add, 0, {0, 1}}, {OpKind::Gelu}}, {x, bias}, geluTol});
  return cases;
}

}  // namespace

void checkFusedGroups(cuda::CudaKernels& kernels, const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory) {
  // f32 as the unfused ops' checks (OpParity.cpp: softmax, softmax_grad, gelu);
  // halves one unit of their last place, with gelu's absolute floor.
  const Tolerance bf16{1e-5, 1.0 / 128}, f16{4e-6, 1.0 / 1024};
  for (const auto& cases : {casesIn(DType::F32, {1e-9, 1e-5}, {1e-9, 1e-6}, {2e-6, 1e-5}),
                            casesIn(DType::BF16, bf16, bf16, bf16), casesIn(DType::F16, f16, f16, f16)})
    for (const FusedCase& c : cases) checkOne(kernels, memory, c);
}

}  // namespace meshflow::gpu_check
