// test_cuda_ops: every graph op the cuda backend runs on the GPU
// (runtime/cuda/KernelPlacement.h), through the backend itself (CudaKernels:
// the cpu kernels' argument checks, managed memory, the launch), against the
// cpu kernel on the same fresh random inputs. Each check also fails if the op
// ran on the host instead, or took the other half-precision path than the case
// says (widened to f32 copies or read as stored, runtime/cuda/OperandPath.h).
// The fused groups are checked last (FusedParity.cpp), then the fused
// attention kernels (AttentionParity.cpp).
// Without a GPU it prints SKIPPED and exits 77.
//
// Tolerances, as |gpu - cpu| <= atol + rtol·|cpu| per element: exact where
// both sides round once in the same order (broadcast arithmetic, relu,
// dropout, masks, embedding, updates of SGD); a few fp32 ulp scaled by the
// output's sensitivity where CUDA's expf/tanhf stand for the cpu's FastMath
// or sums run in another order (see each case).
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/KernelBackend.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "tests/gpu/AttentionParity.h"
#include "tests/gpu/FusedParity.h"
#include "tests/gpu/Parity.h"

namespace {

using namespace meshflow::gpu_check;
using meshflow::ir::Attributes;
using meshflow::runtime::MemoryCategory;
using meshflow::runtime::MemoryScope;

struct OpCase {
  OpCase(std::string name, OpKind kind, std::vector<Tensor> inputs, Attributes attrs = {}, Tolerance tol = {},
         int outputs = 1, cpu::KernelContext ctx = {}, bool inPlace = false)
      : name(std::move(name)), kind(kind), inputs(std::move(inputs)), attrs(std::move(attrs)), tol(tol),
        outputs(outputs), ctx(ctx), inPlace(inPlace) {}
  std::string name;
  OpKind kind;
  std::vector<Tensor> inputs;
  Attributes attrs;
  Tolerance tol;
  int outputs = 1;
  cpu::KernelContext ctx;
  bool inPlace = false;  ///< Outputs j are inputs 0, 3, 4 (the optimizer updates).
  bool onHost = false;   ///< An op the backend leaves to the cpu kernel, on the device's managed memory.
  /// Half operands that the backend must widen to f32 copies
  /// (cuda::OperandPath::kWidened); every other case must read them as stored.
  bool widens = false;
  /// Outputs whose type and shape the caller fixes (an executor's
  /// placeholders), where the op should not choose them itself.
  struct TypedOutput {
    int index;
    DType dtype;
    Shape shape;
  };
  std::vector<TypedOutput> typedOutputs;
  OpCase&& typed(int index, DType dtype, Shape shape) && {
    typedOutputs.push_back({index, dtype, std::move(shape)});
    return std::move(*this);
  }
};

Tensor randomIds(Shape shape, std::int32_t limit) {
  std::uniform_int_distribution<std::int32_t> dist(0, limit - 1);
  std::vector<std::int32_t> values(static_cast<std::size_t>(meshflow::runtime::shapeElements(shape)));
  for (auto& v : values) v = dist(rng);
  return Tensor::fromI32(std::move(shape), std::move(values));
}

std::vector<Tensor> run(const OpCase& c, std::vector<Tensor> inputs, const std::function<void(
    const meshflow::ir::Op&, const std::vector<const Tensor*>&, std::vector<Tensor*>&)>& kernel) {
  meshflow::ir::Op op;
  op.kind = c.kind;
  op.attrs = c.attrs;
  std::vector<const Tensor*> in;
  for (const Tensor& t : inputs) in.push_back(&t);
  std::vector<Tensor> results(static_cast<std::size_t>(c.outputs));
  std::vector<Tensor*> out;
  for (const OpCase::TypedOutput& t : c.typedOutputs)
    results[static_cast<std::size_t>(t.index)] = Tensor::placeholder(t.dtype, t.shape);
  for (int j = 0; j < c.outputs; ++j)
    out.push_back(c.inPlace ? &inputs[j == 0 ? 0 : static_cast<std::size_t>(j) + 2] : &results[static_cast<std::size_t>(j)]);
  kernel(op, in, out);
  for (int j = 0; j < c.outputs; ++j) results[static_cast<std::size_t>(j)] = *out[static_cast<std::size_t>(j)];
  return results;
}

void check(cuda::CudaKernels& kernels, const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory,
           const OpCase& c) {
  std::vector<Tensor> hostInputs;
  for (const Tensor& t : c.inputs) hostInputs.push_back(t.clone());
  auto expected = run(c, std::move(hostInputs), [&](const auto& op, const auto& in, auto& out) {
    cpu::runKernel(op, in, out, c.ctx);
  });
  const std::string opName = meshflow::ir::opName(c.kind);
  const auto countOf = [&](const std::map<std::string, std::int64_t>& counts) {
    return counts.count(opName) ? counts.at(opName) : 0;
  };
  const auto before = countOf(kernels.gpuOps()), hostBefore = countOf(kernels.hostOps());
  const auto widenedBefore = countOf(kernels.widenedOps());
  MemoryScope scope(memory, MemoryCategory::kActivations);
  std::vector<Tensor> deviceInputs;
  for (const Tensor& t : c.inputs) deviceInputs.push_back(t.clone());  // into the GPU's memory
  std::vector<Tensor> actual;
  try {
    actual = run(c, std::move(deviceInputs), [&](const auto& op, const auto& in, auto& out) {
      kernels.run(op, in, out, c.ctx);
    });
  } catch (const std::exception& e) {
    ++failures;
    std::printf("FAIL %-44s %s\n", c.name.c_str(), e.what());
    return;
  }
  if (countOf(c.onHost ? kernels.hostOps() : kernels.gpuOps()) == (c.onHost ? hostBefore : before)) {
    ++failures;
    std::printf("FAIL %-44s did not run on the %s\n", c.name.c_str(), c.onHost ? "host" : "GPU");
    return;
  }
  if ((countOf(kernels.widenedOps()) != widenedBefore) != c.widens) {
    ++failures;
    std::printf("FAIL %-44s %s\n", c.name.c_str(),
                c.widens ? "read its operands as stored, expected f32 copies" : "widened its operands to f32 copies");
    return;
  }
  for (int j = 0; j < c.outputs; ++j)
    expectClose(c.outputs == 1 ? c.name : c.name + " output " + std::to_string(j),
                actual[static_cast<std::size_t>(j)], expected[static_cast<std::size_t>(j)], c.tol);
}

std::vector<OpCase> elementwiseCases() {
  std::vector<OpCase> cases;
  Tensor a = randomTensor({4, 5, 6}), b = randomTensor({5, 1}), c = randomTensor({4, 5, 6});
  for (auto [name, kind] : {std::pair{"add (broadcast [5,1])", OpKind::Add}, {"sub (broadcast [5,1])", OpKind::Sub},
                            {"mul (broadcast [5,1])", OpKind::Mul}, {"div (broadcast [5,1])", OpKind::Div}})
    cases.push_back({name, kind, {a, b}});
  cases.push_back({"add (same shape)", OpKind::Add, {a, c}});
  Tensor x = randomTensor({1 << 20}, -6.0f, 6.0f), dy = randomTensor({1 << 20});
  cases.push_back({"neg", OpKind::Neg, {x}});
  cases.push_back({"relu", OpKind::Relu, {x}});
  cases.push_back({"scale", OpKind::Scale, {x}, {{"factor", 0.37}}});
  // CUDA's expf against std::exp: 2 ulp.
  cases.push_back({"exp", OpKind::Exp, {x}, {}, {0, 3e-7}});
  // tanhf against the cpu's fastTanh: a few ulp of 1.
  cases.push_back({"tanh", OpKind::Tanh, {x}, {}, {1e-6, 1e-6}});
  cases.push_back({"sigmoid", OpKind::Sigmoid, {x}, {}, {1e-7, 1e-6}});
  // As test_cuda_kernels: δtanh times x/2 (gelu) or dy·(1/2 + x·t·C·(1 + 3A·x²)) (its gradient).
  cases.push_back({"gelu", OpKind::Gelu, {x}, {}, {2e-6, 1e-5}});
  cases.push_back({"relu_grad", OpKind::ReluGrad, {x, dy}});
  cases.push_back({"gelu_grad", OpKind::GeluGrad, {x, dy}, {}, {2e-5, 1e-5}});
  Tensor t = randomTensor({1 << 20}, -1.0f, 1.0f), s = randomTensor({1 << 20}, 0.0f, 1.0f);
  cases.push_back({"tanh_grad", OpKind::TanhGrad, {t, dy}});
  cases.push_back({"sigmoid_grad", OpKind::SigmoidGrad, {s, dy}});
  cpu::KernelContext dropoutAt{3, 5, 1000};
  cases.push_back({"dropout (p 0.3, offset 1000)", OpKind::Dropout, {x}, {{"p", 0.3}, {"seed", std::int64_t{7}}},
                   {}, 1, dropoutAt});
  cases.push_back({"dropout_grad (p 0.3)", OpKind::DropoutGrad, {dy},
                   {{"p", 0.3}, {"seed", std::int64_t{7}}, {"forward_op", std::int64_t{5}}}, {}, 1, dropoutAt});
  Tensor scores = randomTensor({2, 3, 37, 37});
  cases.push_back({"causal_mask", OpKind::CausalMask, {scores}});
  cases.push_back({"causal_mask_grad", OpKind::CausalMaskGrad, {scores}});
  return cases;
}

std::vector<OpCase> rowCases() {
  std::vector<OpCase> cases;
  Tensor x = randomTensor({3, 21, 700}, -8.0f, 8.0f), dy = randomTensor({3, 21, 700});
  cases.push_back({"softmax", OpKind::Softmax, {x}, {}, {1e-9, 1e-5}});
  Tensor y = randomTensor({3, 21, 700}, 0.0f, 0.01f);
  // Σ y·dy in double on both sides, in another order: fp32 rounding of the result.
  cases.push_back({"softmax_grad", OpKind::SoftmaxGrad, {y, dy}, {}, {1e-9, 1e-6}});
  Tensor h = randomTensor({33, 768}), gamma = randomTensor({768}), beta = randomTensor({768}), dh = randomTensor({33, 768});
  cases.push_back({"layer_norm", OpKind::LayerNorm, {h, gamma, beta}, {{"eps", 1e-5}}, {1e-5, 1e-5}});
  // Moments and sums in double on both sides: the fp32 rounding of outputs
  // that subtract nearly equal terms (dx), over 33 rows (dgamma, dbeta).
  cases.push_back({"layer_norm_grad", OpKind::LayerNormGrad, {h, gamma, dh}, {{"eps", 1e-5}}, {1e-5, 1e-5}, 3});
  // 4,096 rows: dgamma and dbeta summed in 64 chunks of rows, added in order.
  Tensor tall = randomTensor({4096, 64}), tallGamma = randomTensor({64}), tallDy = randomTensor({4096, 64});
  cases.push_back({"layer_norm_grad (4096 rows: chunked columns)", OpKind::LayerNormGrad, {tall, tallGamma, tallDy},
                   {{"eps", 1e-5}}, {1e-5, 1e-5}, 3});
  Tensor logits = randomTensor({4, 7, 500}, -5.0f, 5.0f), labels = randomIds({4, 7}, 500);
  // log Σ exp in double from CUDA's expf against the cpu's exp: a few ulp.
  cases.push_back({"cross_entropy", OpKind::CrossEntropy, {logits, labels}, {}, {1e-6, 1e-6}});
  cases.push_back({"cross_entropy_grad", OpKind::CrossEntropyGrad, {logits, labels, Tensor::scalar(1.7f)}, {},
                   {1e-9, 1e-5}});
  return cases;
}

std::vector<OpCase> tableAndUpdateCases() {
  std::vector<OpCase> cases;
  Tensor table = randomTensor({50, 24}), ids = randomIds({6, 9}, 50), dy = randomTensor({6, 9, 24});
  cases.push_back({"embedding", OpKind::Embedding, {table, ids}});
  // fp32 sums of repeated ids in position order on both sides.
  cases.push_back({"embedding_grad", OpKind::EmbeddingGrad, {ids, dy}, {{"vocab", std::int64_t{50}}}});
  // Many positions per id (2,048 over 40 of 50 ids: rows left zero too), the same order as the cpu kernel.
  Tensor manyIds = randomIds({16, 128}, 40), manyDy = randomTensor({16, 128, 24});
  cases.push_back({"embedding_grad (2048 positions)", OpKind::EmbeddingGrad, {manyIds, manyDy},
                   {{"vocab", std::int64_t{50}}}});
  Tensor grads = randomTensor({6, 7, 33}), bias = randomTensor({33}), rows = randomTensor({7, 33});
  cases.push_back({"reduce_to_shape (bias)", OpKind::ReduceToShape, {grads, bias}, {}, {1e-9, 1e-7}});
  cases.push_back({"reduce_to_shape (rows)", OpKind::ReduceToShape, {grads, rows}, {}, {1e-9, 1e-7}});
  // Sums along any axes: one thread per output, the cpu kernel's order and double accumulator.
  Tensor inner = randomTensor({6, 1, 33});
  cases.push_back({"reduce_to_shape ([6,1,33]: the middle axis)", OpKind::ReduceToShape, {grads, inner}, {}, {1e-9, 1e-7}});
  const auto axes = [](std::vector<std::int64_t> a) { return Attributes{{"axes", std::move(a)}}; };
  cases.push_back({"sum (every axis)", OpKind::Sum, {grads}, {}, {1e-9, 1e-7}});
  cases.push_back({"sum over axes 0, 2", OpKind::Sum, {grads}, axes({0, 2}), {1e-9, 1e-7}});
  cases.push_back({"mean over axis 1", OpKind::Mean, {grads}, axes({1}), {1e-9, 1e-7}});
  // Long sums into few outputs run in chunks (cuda::sumOver): a last chunk
  // shorter than the others, and a mean over the leading axis.
  cases.push_back({"reduce_to_shape (bias of [7,300,96]: chunks)", OpKind::ReduceToShape,
                   {randomTensor({7, 300, 96}), randomTensor({96})}, {}, {1e-9, 1e-7}});
  cases.push_back({"mean over axis 0 of [3000,5] (chunks)", OpKind::Mean, {randomTensor({3000, 5})}, axes({0}),
                   {1e-9, 1e-7}});
  cases.push_back({"broadcast_to (like's shape)", OpKind::BroadcastTo, {inner, grads}});
  cases.push_back({"broadcast_to (axes 0, 2 removed)", OpKind::BroadcastTo, {randomTensor({7}), grads}, axes({0, 2})});
  cases.push_back({"global_norm (3 tensors)", OpKind::GlobalNorm, {grads, bias, rows}, {}, {0, 1e-6}, 1});
  cases.push_back({"global_norm squared (the runtime's clipping)", OpKind::GlobalNorm, {grads, bias, rows},
                   {{"squared", std::int64_t{1}}}, {0, 1e-6}, 1});
  Tensor w = randomTensor({1000}), g = randomTensor({1000}), m = randomTensor({1000}),
         v = randomTensor({1000}, 0.0f, 1.0f), scale = Tensor::scalar(0.8f);
  cases.push_back({"sgd_update (in place)", OpKind::SgdUpdate, {w, g, scale, m},
                   {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}}, {}, 2, {}, true});
  // sqrt and division: one rounding each, on both sides.
  cases.push_back({"adam_update (in place)", OpKind::AdamUpdate, {w, g, scale, m, v},
                   {{"lr", 1e-3}, {"weight_decay", 0.01}}, {1e-9, 1e-6}, 3, {3, 0, 0}, true});
  cases.push_back({"adamw_update", OpKind::AdamUpdate, {w, g, scale, m, v},
                   {{"lr", 1e-3}, {"weight_decay", 0.01}, {"decoupled", std::int64_t{1}}}, {1e-9, 1e-6}, 3, {2, 0, 0}});
  return cases;
}

std::vector<OpCase> matmulCases() {
  std::vector<OpCase> cases;
  const std::int64_t m = 37, n = 29, k = 65;
  Tolerance f32{4e-6 * std::sqrt(double(k)), 1e-5};
  auto transposes = [](bool a, bool b) {
    return Attributes{{"transpose_a", std::int64_t{a}}, {"transpose_b", std::int64_t{b}}};
  };
  cases.push_back({"matmul f32 [2,m,k] x [k,n]", OpKind::MatMul, {randomTensor({2, m, k}, -1, 1), randomTensor({k, n}, -1, 1)},
                   {}, f32});
  cases.push_back({"matmul f32 [2,m,k] x [2,n,k] (b transposed)", OpKind::MatMul,
                   {randomTensor({2, m, k}, -1, 1), randomTensor({2, n, k}, -1, 1)}, transposes(false, true), f32});
  cases.push_back({"matmul f32 [2,k,m] x [k,n] (a transposed)", OpKind::MatMul,
                   {randomTensor({2, k, m}, -1, 1), randomTensor({k, n}, -1, 1)}, transposes(true, false), f32});
  // Inputs rounded to bf16 on both sides; the output rounded to bf16 twice at most.
  cases.push_back({"matmul bf16 [2,m,k] x [k,n]", OpKind::MatMul,
                   {randomTensor({2, m, k}, -1, 1).castTo(DType::BF16), randomTensor({k, n}, -1, 1).castTo(DType::BF16)},
                   {}, {f32.atol, 2.0 / 256}});
  // A half weight's gradient kept in fp32 (ir::kF32Outputs): bf16 operands, an f32 y.
  cases.push_back(
      OpCase{"matmul bf16 -> f32 [2,k,m] x [2,k,n] (a transposed)", OpKind::MatMul,
             {randomTensor({2, k, m}, -1, 1).castTo(DType::BF16), randomTensor({2, k, n}, -1, 1).castTo(DType::BF16)},
             transposes(true, false), f32}
          .typed(0, DType::F32, {2, m, n}));
  return cases;
}

// The layout ops on the GPU: element moves, the same bits as the cpu kernels.
std::vector<OpCase> layoutCases() {
  std::vector<OpCase> cases;
  const auto perm = [](std::vector<std::int64_t> p) { return Attributes{{"perm", std::move(p)}}; };
  cases.push_back({"transpose f32 (perm 2,0,1)", OpKind::Transpose, {randomTensor({3, 5, 7})}, perm({2, 0, 1})});
  cases.push_back({"transpose bf16 (last two)", OpKind::Transpose, {randomTensor({4, 33, 65}).castTo(DType::BF16)},
                   perm({0, 2, 1})});
  cases.push_back({"split_heads bf16", OpKind::SplitHeads, {randomTensor({2, 5, 12}).castTo(DType::BF16)},
                   {{"heads", std::int64_t{3}}}});
  cases.push_back({"merge_heads f32", OpKind::MergeHeads, {randomTensor({2, 3, 5, 4})}});
  cases.push_back({"concat f16 (axis 1)", OpKind::Concat,
                   {randomTensor({3, 2, 7}).castTo(DType::F16), randomTensor({3, 4, 7}).castTo(DType::F16)},
                   {{"axis", std::int64_t{1}}}});
  cases.push_back({"split bf16 (3 equal parts, last axis)", OpKind::Split, {randomTensor({2, 5, 36}).castTo(DType::BF16)},
                   {{"axis", std::int64_t{-1}}}, {}, 3});
  cases.push_back({"split i32 (sizes 2, 4)", OpKind::Split, {randomIds({4, 6}, 1000)},
                   {{"axis", std::int64_t{1}}, {"sizes", std::vector<std::int64_t>{2, 4}}}, {}, 2});
  return cases;
}

// Casts on the GPU round as the host does (runtime/HalfBits.h): the same bits,
// normal values and f16 subnormals alike.
std::vector<OpCase> castCases() {
  std::vector<OpCase> cases;
  const auto to = [](const char* dtype) { return Attributes{{"dtype", std::string(dtype)}}; };
  Tensor x = randomTensor({1 << 16}), tiny = randomTensor({1 << 16}, -1e-5f, 1e-5f);
  cases.push_back({"cast f32 -> bf16", OpKind::Cast, {x}, to("bf16")});
  cases.push_back({"cast f32 -> f16", OpKind::Cast, {x}, to("f16")});
  cases.push_back({"cast f32 -> f16 (subnormals)", OpKind::Cast, {tiny}, to("f16")});
  cases.push_back({"cast bf16 -> f32", OpKind::Cast, {x.castTo(DType::BF16)}, to("f32")});
  cases.push_back({"cast f16 -> bf16", OpKind::Cast, {x.castTo(DType::F16)}, to("bf16")});
  return cases;
}

// Half-precision operands: computed in f32 and rounded once, as the cpu
// kernels do on the host (element-wise ops of one half type in their own
// kernels, the rest on widened copies). The f32 results agree
// to a few ulp, so a rounded result may differ by one unit of the half's last
// place: 2^-7 relative for bf16, 2^-10 for f16, and an absolute floor for
// results that cancel towards zero: gelu_grad near GeLU's minimum (x ≈ -0.75)
// is a difference of terms up to |x| = 4 whose f32 rounding and tanh (a few
// ulp) leave up to ~2e-6 (a lent H200 measured 1.91e-6), so 4e-6 for f16.
std::vector<OpCase> halfCases() {
  std::vector<OpCase> cases;
  const Tolerance bf16{1e-5, 1.0 / 128}, f16{4e-6, 1.0 / 1024};
  const auto half = [](Tensor t, DType dtype) { return t.castTo(dtype); };
  Tensor x = randomTensor({64, 96}, -4.0f, 4.0f), dy = randomTensor({64, 96});
  cases.push_back({"gelu bf16", OpKind::Gelu, {half(x, DType::BF16)}, {}, bf16});
  cases.push_back({"gelu_grad f16", OpKind::GeluGrad, {half(x, DType::F16), half(dy, DType::F16)}, {}, f16});
  cases.push_back({"add bf16 (broadcast [96])", OpKind::Add, {half(x, DType::BF16), half(randomTensor({96}), DType::BF16)},
                   {}, bf16});
  // Element-wise ops on one half type read and write it in their kernel
  // (one pass); the rest widen to f32 copies around the f32 kernel.
  cases.push_back({"mul f16 (same shape)", OpKind::Mul, {half(x, DType::F16), half(dy, DType::F16)}, {}, f16});
  cases.push_back({"scale bf16", OpKind::Scale, {half(x, DType::BF16)}, {{"factor", 0.37}}, bf16});
  cases.push_back({"tanh_grad bf16", OpKind::TanhGrad, {half(x, DType::BF16), half(dy, DType::BF16)}, {}, bf16});
  OpCase mixed{"add bf16 + f32 (widened)", OpKind::Add, {half(x, DType::BF16), dy}, {}, bf16};
  mixed.widens = true;
  cases.push_back(mixed);
  Tensor probs = randomTensor({64, 96}, 0.0f, 0.02f);
  cases.push_back({"softmax_grad bf16", OpKind::SoftmaxGrad, {half(probs, DType::BF16), half(dy, DType::BF16)}, {},
                   bf16});
  cases.push_back({"dropout f16 (p 0.1)", OpKind::Dropout, {half(x, DType::F16)}, {{"p", 0.1}, {"seed", std::int64_t{3}}},
                   f16, 1, cpu::KernelContext{2, 9, 64}});
  Tensor scores = randomTensor({2, 4, 24, 24}, -3.0f, 3.0f);
  cases.push_back({"causal_mask bf16", OpKind::CausalMask, {half(scores, DType::BF16)}, {}, bf16});
  cases.push_back({"softmax bf16", OpKind::Softmax, {half(x, DType::BF16)}, {}, bf16});
  Tensor gamma = half(randomTensor({96}), DType::BF16), beta = half(randomTensor({96}), DType::BF16);
  cases.push_back({"layer_norm bf16", OpKind::LayerNorm, {half(x, DType::BF16), gamma, beta}, {{"eps", 1e-5}}, bf16});
  cases.push_back({"layer_norm_grad bf16", OpKind::LayerNormGrad, {half(x, DType::BF16), gamma, half(dy, DType::BF16)},
                   {{"eps", 1e-5}}, {1e-4, 1.0 / 128}, 3});
  Tensor logits = half(randomTensor({4, 7, 500}), DType::BF16), labels = randomIds({4, 7}, 500);
  // The loss stays f32: from the same logits read as f32, as cross_entropy f32.
  cases.push_back({"cross_entropy bf16 logits", OpKind::CrossEntropy, {logits, labels}, {}, {1e-6, 1e-6}});
  cases.push_back({"cross_entropy_grad bf16 logits", OpKind::CrossEntropyGrad, {logits, labels, Tensor::scalar(1.3f)},
                   {}, bf16});
  cases.push_back({"embedding bf16 table", OpKind::Embedding, {half(randomTensor({50, 24}), DType::BF16),
                                                              randomIds({6, 9}, 50)}});
  // Its gradient from bf16 dy: in bf16 (dy's type), and in f32 where the caller asks (a half model's weight gradient).
  Tensor ids = randomIds({6, 9}, 50), dys = half(randomTensor({6, 9, 24}), DType::BF16);
  cases.push_back({"embedding_grad bf16", OpKind::EmbeddingGrad, {ids, dys}, {{"vocab", std::int64_t{50}}}, bf16});
  cases.push_back(OpCase{"embedding_grad bf16 dy, f32 table", OpKind::EmbeddingGrad, {ids, dys},
                         {{"vocab", std::int64_t{50}}}, {1e-6, 1e-6}}
                      .typed(0, DType::F32, {50, 24}));
  return cases;
}

// Layer norm, its backward, the sums, BroadcastTo, the global norm and the
// updates on half operands, read and written as they are stored (check()
// fails a case the backend widened to f32 copies), in bf16 and in f16. Both
// sides read the same rounded inputs and compute each result in f32 (or
// double) as the f32 cases do, then round it to the half type once; two f32
// values that agree to the f32 case's tolerance δ round to halves that differ
// by at most δ plus one unit in the half's last place: 2^-7 relative for
// bf16 (8 significant bits), 2^-10 for f16 (11), and 2^-24 absolute for f16
// subnormals (below 2^-14). So each tolerance is the f32 case's plus that
// unit (`rounded`); results kept in f32 (a half model's parameter gradients and
// optimizer state) need only the f32 case's, and the one tolerance of a case
// covers its loosest output. The update of SGD stays exact: the same f32
// operations on the same values on both sides, rounded once.
std::vector<OpCase> halfKernelCases() {
  std::vector<OpCase> cases;
  const auto axes = [](std::vector<std::int64_t> a) { return Attributes{{"axes", std::move(a)}}; };
  const Attributes eps{{"eps", 1e-5}};
  const Attributes sgd{{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}};
  const Attributes adam{{"lr", 1e-3}, {"weight_decay", 0.01}};
  const Attributes adamw{{"lr", 1e-3}, {"weight_decay", 0.01}, {"decoupled", std::int64_t{1}}};
  const Tensor scale = Tensor::scalar(0.8f);
  for (const DType dtype : {DType::BF16, DType::F16}) {
    const std::string t = meshflow::ir::dtypeName(dtype);
    const auto rounded = [dtype](Tolerance f32) {
      return dtype == DType::BF16 ? Tolerance{f32.atol, f32.rtol + 1.0 / 128}
                                  : Tolerance{f32.atol + std::ldexp(1.0, -24), f32.rtol + 1.0 / 1024};
    };
    const auto half = [dtype](const Tensor& x) { return x.castTo(dtype); };
    // Rows of 300: more than a block's 256 threads, and not a multiple of them.
    Tensor x = half(randomTensor({37, 300})), gamma = half(randomTensor({300})), beta = half(randomTensor({300}));
    Tensor dy = half(randomTensor({37, 300}));
    cases.push_back({"layer_norm " + t, OpKind::LayerNorm, {x, gamma, beta}, eps, rounded({1e-5, 1e-5})});
    cases.push_back({"layer_norm_grad " + t, OpKind::LayerNormGrad, {x, gamma, dy}, eps, rounded({1e-5, 1e-5}), 3});
    // A half model's: dgamma and dbeta in f32 (ir::kF32Outputs), 4,096 rows in
    // 64 chunks a column, which a block adds (cuda::kBlockAddsFrom).
    Tensor tall = half(randomTensor({4096, 64})), tallGamma = half(randomTensor({64}));
    Tensor tallDy = half(randomTensor({4096, 64}));
    cases.push_back(OpCase{"layer_norm_grad " + t + " -> f32 dgamma, dbeta (4096 rows)", OpKind::LayerNormGrad,
                           {tall, tallGamma, tallDy}, eps, rounded({1e-5, 1e-5}), 3}
                        .typed(1, DType::F32, {64})
                        .typed(2, DType::F32, {64}));
    // Sums: in double on both sides, in another order; the f32 cases' {1e-9, 1e-7}.
    // The bias: 32 chunks an output, the [3000,5] mean 46, each added by a
    // thread; the 2^20 elements into one output, 16,384 chunks added by a block.
    Tensor grads = half(randomTensor({7, 300, 96})), bias = half(randomTensor({96}));
    cases.push_back({"reduce_to_shape " + t + " (bias of [7,300,96]: chunks)", OpKind::ReduceToShape, {grads, bias},
                     {}, rounded({1e-9, 1e-7})});
    cases.push_back(OpCase{"reduce_to_shape " + t + " -> f32 (a half model's bias gradient)", OpKind::ReduceToShape,
                           {grads, bias}, {}, {1e-9, 1e-7}}
                        .typed(0, DType::F32, {96}));
    Tensor small = half(randomTensor({6, 7, 33}));
    cases.push_back({"sum " + t + " over axes 0, 2", OpKind::Sum, {small}, axes({0, 2}), rounded({1e-9, 1e-7})});
    cases.push_back({"mean " + t + " over axis 0 of [3000,5] (chunks)", OpKind::Mean, {half(randomTensor({3000, 5}))},
                     axes({0}), rounded({1e-9, 1e-7})});
    cases.push_back({"sum " + t + " of 2^20 elements (16384 chunks, one block adds them)", OpKind::Sum,
                     {half(randomTensor({1024, 1024}))}, {}, rounded({1e-9, 1e-7})});
    // A copy: the same bits.
    cases.push_back({"broadcast_to " + t + " (axes 0, 2 removed)", OpKind::BroadcastTo,
                     {half(randomTensor({7})), small}, axes({0, 2})});
    // Squares in double from the same values: the f32 case's tolerance (an f32 result).
    cases.push_back({"global_norm " + t + " 2^20 + f32 33 (64 blocks)", OpKind::GlobalNorm,
                     {half(randomTensor({1 << 20})), randomTensor({33})}, {}, {0, 1e-6}});
    Tensor w = half(randomTensor({1000})), g = randomTensor({1000}), m = randomTensor({1000});
    Tensor v = randomTensor({1000}, 0.0f, 1.0f);
    cases.push_back({"sgd_update " + t + " weight, f32 gradient, momentum (in place)", OpKind::SgdUpdate,
                     {w, g, scale, m}, sgd, {}, 2, {}, true});
    cases.push_back({"adam_update " + t + " weight, f32 gradient, state (in place)", OpKind::AdamUpdate,
                     {w, g, scale, m, v}, adam, rounded({1e-9, 1e-6}), 3, {3, 0, 0}, true});
    cases.push_back({"adamw_update " + t + " weight, gradient and state", OpKind::AdamUpdate,
                     {w, half(g), scale, half(m), half(v)}, adamw, rounded({1e-9, 1e-6}), 3, {2, 0, 0}});
  }
  // The spread sums in f32 too: one output from 16,384 chunks, a norm over 64 blocks.
  cases.push_back({"sum f32 of 2^20 elements (16384 chunks, one block adds them)", OpKind::Sum,
                   {randomTensor({1024, 1024})}, {}, {1e-9, 1e-7}});
  cases.push_back({"global_norm f32 2^20 (64 blocks)", OpKind::GlobalNorm, {randomTensor({1 << 20})}, {}, {0, 1e-6}});
  return cases;
}

// Ops the backend runs with the cpu kernel on the host, reading and writing
// the device's managed memory: the same bits as the cpu kernel.
std::vector<OpCase> hostCases() {
  std::vector<OpCase> cases;
  OpCase gate{"top_k_gate k=2 (host, managed memory)", OpKind::TopKGate, {randomTensor({4, 8})},
              {{"k", std::int64_t{2}}}};
  gate.onHost = true;
  cases.push_back(gate);
  return cases;
}

// Ops in a KernelBatch, as OpRunner runs a stage: no wait between them, each
// intermediate dropped as soon as the next op is enqueued (its block goes back
// to the cache while an op may still read it), an embedding's ids checked on
// the host mid-batch. The result must equal the same chain on the host.
void checkBatchedChain(cuda::CudaKernels& kernels, const std::shared_ptr<meshflow::runtime::DeviceMemory>& memory) {
  const auto op = [](OpKind kind, Attributes attrs = {}) {
    meshflow::ir::Op o;
    o.kind = kind;
    o.attrs = std::move(attrs);
    return o;
  };
  const auto chain = [&](const Tensor& table, const Tensor& ids, const auto& runOne) {
    Tensor h = runOne(op(OpKind::Embedding), std::vector<const Tensor*>{&table, &ids});  // [4, 64, 32]
    for (int round = 0; round < 3; ++round) {
      h = runOne(op(OpKind::SplitHeads, {{"heads", std::int64_t{4}}}), std::vector<const Tensor*>{&h});
      h = runOne(op(OpKind::Softmax), std::vector<const Tensor*>{&h});
      h = runOne(op(OpKind::MergeHeads), std::vector<const Tensor*>{&h});
      h = runOne(op(OpKind::Gelu), std::vector<const Tensor*>{&h});
    }
    return h;
  };
  Tensor table = randomTensor({100, 32}), ids = randomIds({4, 64}, 100);
  Tensor expected = chain(table, ids, [](const meshflow::ir::Op& o, std::vector<const Tensor*> in) {
    Tensor y;
    std::vector<Tensor*> out{&y};
    cpu::runKernel(o, in, out, {});
    return y;
  });
  MemoryScope scope(memory, MemoryCategory::kActivations);
  Tensor deviceTable = table.clone(), deviceIds = ids.clone();
  Tensor actual;
  try {
    meshflow::runtime::KernelScope kernelScope(&kernels);
    meshflow::runtime::KernelBatch batch;
    actual = chain(deviceTable, deviceIds, [](const meshflow::ir::Op& o, std::vector<const Tensor*> in) {
      Tensor y;
      std::vector<Tensor*> out{&y};
      meshflow::runtime::runKernel(o, in, out, {});
      return y;
    });
    batch.finish();
  } catch (const std::exception& e) {
    ++failures;
    std::printf("FAIL %-44s %s\n", "batched chain (13 ops, no waits)", e.what());
    return;
  }
  expectClose("batched chain (13 ops, no waits)", actual, expected, {1e-7, 1e-5});
}

}  // namespace

int main() {
  if (!startChecks("test_cuda_ops")) return kSkipped;
  try {
    cuda::CudaKernels kernels(0);
    // Both memories the backend runs on: managed (the host reads in place)
    // and device memory (the host reads a copy, Tensor::deviceData).
    for (const bool managed : {true, false}) {
      std::printf("== tensors in %s memory\n", managed ? "managed" : "device");
      auto memory = cuda::makeDeviceMemory(0, 0, 0, managed);
      for (auto cases : {elementwiseCases(), rowCases(), tableAndUpdateCases(), matmulCases(), layoutCases(),
                          castCases(), halfCases(), halfKernelCases(), hostCases()})
        for (const OpCase& c : cases) check(kernels, memory, c);
      checkBatchedChain(kernels, memory);
      checkFusedGroups(kernels, memory);
      checkFusedAttention(kernels, memory);
      std::printf("ops on the GPU: %zu kinds; %s memory peak %lld bytes\n", kernels.gpuOps().size(),
                  managed ? "managed" : "device", static_cast<long long>(memory->stats().peak));
    }
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  return finishChecks("CUDA op checks");
}
