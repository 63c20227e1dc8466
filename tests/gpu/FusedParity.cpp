// test_cuda_ops' fused groups (runtime/FusedOps.h): each pattern (element-wise
// chains of two and of eight ops among them) through
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
std::vector<Tensor> runChain(const FusedCase& c, const std::vector<Tensor>& inputs,
                             cuda::CudaKernels* kernels) {
  std::vector<Tensor> made;
  for (const ChainOp& step : c.chain) {
    meshflow::ir::Op op;
    op.kind = step.kind;
    if (step.kind == OpKind::Scale) op.attrs["factor"] = step.factor;
    std::vector<const Tensor*> in;
    for (int k : step.reads)
      in.push_back(k < 0 ? &made.back() : &inputs[static_cast<std::size_t>(k)]);
    Tensor y;
    std::vector<Tensor*> out{&y};
    if (kernels)
      kernels->run(op, in, out, {});
    else
      cpu::runKernel(op, in, out, {});
    made.push_back(std::move(y));
  }
  return made;
}

// The group's outputs from the chain's op outputs.
std::vector<Tensor> groupOutputs(const FusedCase& c, const std::vector<Tensor>& made) {
  if (c.group.pattern == FusedPattern::kBiasGelu) return {made.front(), made.back()};
  return {made.back()};
}

void checkOne(cuda::CudaKernels& kernels,
              const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory, const FusedCase& c) {
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

FusedGroup groupOf(FusedPattern pattern, std::size_t count, double scale, bool causal,
                   std::size_t inputs, std::size_t outputs) {
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

meshflow::runtime::ChainStep chainStep(OpKind kind, int other = -1, bool chainOnRight = false,
                                       double factor = 1.0) {
  meshflow::runtime::ChainStep step;
  step.kind = kind;
  step.other = other;
  step.chainOnRight = chainOnRight;
  step.factor = factor;
  return step;
}

std::vector<FusedCase> casesIn(DType dtype, Tolerance softmaxTol, Tolerance gradTol,
                               Tolerance geluTol, Tolerance chainTol) {
  const Tolerance exactTol{0, 0};  // additions: one rounding each, in the same order on both sides
  const std::string type = meshflow::ir::dtypeName(dtype);
  const double factor =
      0.3535533905932738;  // 1 / sqrt(8): not a power of 2, so a half product rounds
  const auto half = [dtype](Tensor t) { return t.castTo(dtype); };
  std::vector<FusedCase> cases;
  const Tensor scores = half(randomTensor({2, 3, 37, 37}, -8.0f, 8.0f));
  cases.push_back({"fused scale+causal_mask+softmax " + type,
                   groupOf(FusedPattern::kSoftmax, 3, factor, true, 1, 1),
                   {{OpKind::Scale, factor}, {OpKind::CausalMask}, {OpKind::Softmax}},
                   {scores},
                   softmaxTol});
  cases.push_back({"fused scale+softmax " + type,
                   groupOf(FusedPattern::kSoftmax, 2, factor, false, 1, 1),
                   {{OpKind::Scale, factor}, {OpKind::Softmax}},
                   {scores},
                   softmaxTol});
  // y a causal softmax's (zero above the diagonal), as the backward reads it.
  const Tensor y = runCpu(OpKind::Softmax, {&scores});
  const Tensor masked = runCpu(OpKind::CausalMask, {&scores});
  const Tensor maskedY = runCpu(OpKind::Softmax, {&masked});
  const Tensor dy = half(randomTensor({2, 3, 37, 37}));
  cases.push_back(
      {"fused softmax_grad+causal_mask_grad+scale " + type,
       groupOf(FusedPattern::kSoftmaxGrad, 3, factor, true, 2, 1),
       {{OpKind::SoftmaxGrad, 0, {0, 1}}, {OpKind::CausalMaskGrad}, {OpKind::Scale, factor}},
       {maskedY, dy},
       gradTol});
  cases.push_back({"fused softmax_grad+scale " + type,
                   groupOf(FusedPattern::kSoftmaxGrad, 2, factor, false, 2, 1),
                   {{OpKind::SoftmaxGrad, 0, {0, 1}}, {OpKind::Scale, factor}},
                   {y, dy},
                   gradTol});
  const Tensor x = half(randomTensor({4, 33, 96}, -4.0f, 4.0f)), bias = half(randomTensor({96}));
  cases.push_back({"fused add(bias)+gelu " + type,
                   groupOf(FusedPattern::kBiasGelu, 2, 1.0, false, 2, 2),
                   {{OpKind::Add, 0, {0, 1}}, {OpKind::Gelu}},
                   {x, bias},
                   geluTol});
  // A GPT's bias add and residual add: r + (x + bias).
  const Tensor r = half(randomTensor({4, 33, 96}));
  FusedGroup residual = groupOf(FusedPattern::kElementwise, 2, 1.0, false, 3, 1);
  residual.steps = {chainStep(OpKind::Add, 1), chainStep(OpKind::Add, 2, true)};
  cases.push_back({"fused chain add(bias)+add(residual) " + type,
                   residual,
                   {{OpKind::Add, 0, {0, 1}}, {OpKind::Add, 0, {2, -1}}},
                   {x, bias, r},
                   exactTol});
  // Every kind of step, operands broadcast along rows and columns:
  // (bias + x) · 0.7 → tanh → w − (·) → gelu → (·) / d → sigmoid → exp.
  const Tensor w = half(randomTensor({33, 96})), d = half(randomTensor({4, 33, 1}, 0.5f, 3.0f));
  FusedGroup longChain = groupOf(FusedPattern::kElementwise, 8, 1.0, false, 4, 1);
  longChain.steps = {chainStep(OpKind::Add, 1),  chainStep(OpKind::Scale, -1, false, 0.7),
                     chainStep(OpKind::Tanh),    chainStep(OpKind::Sub, 2, true),
                     chainStep(OpKind::Gelu),    chainStep(OpKind::Div, 3),
                     chainStep(OpKind::Sigmoid), chainStep(OpKind::Exp)};
  cases.push_back({"fused chain of 8 (add .. exp) " + type,
                   longChain,
                   {{OpKind::Add, 0, {0, 1}},
                    {OpKind::Scale, 0.7},
                    {OpKind::Tanh},
                    {OpKind::Sub, 0, {2, -1}},
                    {OpKind::Gelu},
                    {OpKind::Div, 0, {-1, 3}},
                    {OpKind::Sigmoid},
                    {OpKind::Exp}},
                   {bias, x, w, d},
                   chainTol});
  return cases;
}

}  // namespace

void checkFusedGroups(cuda::CudaKernels& kernels,
                      const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory) {
  // f32 as the unfused ops' checks (OpParity.cpp: softmax, softmax_grad, gelu);
  // halves one unit of their last place, with gelu's absolute floor.
  // The chain of 8 against the cpu chain: where tanh, exp or sigmoid differ
  // by an ulp, an intermediate may round to the neighbouring half value, and
  // the later steps carry that unit on (w − t, gelu and / d, d ≥ 0.5, at
  // most double it; sigmoid and exp shrink it): twice the half tolerance.
  const Tolerance bf16{1e-5, 1.0 / 128}, f16{4e-6, 1.0 / 1024};
  const Tolerance bf16Chain{2e-5, 2.0 / 128}, f16Chain{8e-6, 2.0 / 1024};
  for (const auto& cases :
       {casesIn(DType::F32, {1e-9, 1e-5}, {1e-9, 1e-6}, {2e-6, 1e-5}, {2e-6, 1e-5}),
        casesIn(DType::BF16, bf16, bf16, bf16, bf16Chain),
        casesIn(DType::F16, f16, f16, f16, f16Chain)})
    for (const FusedCase& c : cases) checkOne(kernels, memory, c);
}

}  // namespace meshflow::gpu_check
