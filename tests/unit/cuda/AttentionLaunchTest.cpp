// Which fused attentions the cuda backend's kernels take (runtime/cuda/
// AttentionLaunch.h) and which it leaves to the host, the kernels' own
// argument errors (thrown before any launch), and MESHFLOW_CUDA_FUSE's
// switch — all without a GPU. The kernels' results are checked on a GPU by
// test_cuda_ops (tests/gpu/AttentionParity.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>

#include "runtime/cuda/AttentionLaunch.h"
#include "runtime/cuda/CudaKernels.h"

namespace cuda = meshflow::runtime::cuda;
namespace cpu = meshflow::runtime::cpu;
namespace ir = meshflow::ir;
using meshflow::runtime::Shape;
using meshflow::runtime::Tensor;

namespace {

Tensor typed(ir::DType dtype, Shape shape) { return Tensor::placeholder(dtype, std::move(shape)); }

std::optional<cuda::AttentionSizes> sizesOf(Shape q, Shape kv, bool causal, ir::DType dtype = ir::DType::F32) {
  const Tensor qt = typed(dtype, std::move(q)), kt = typed(dtype, kv), vt = typed(dtype, kv);
  return cuda::attentionSizes(qt, kt, vt, cpu::AttentionOptions{0.125, causal});
}

}  // namespace

TEST_CASE("the attention kernels take heads, grouped queries and head dims up to the bound", "[cuda][attention]") {
  const auto heads = sizesOf({2, 4, 40, 64}, {2, 4, 40, 64}, true, ir::DType::BF16);
  REQUIRE(heads);
  CHECK(heads->n == 8);
  CHECK(heads->r == 40);
  CHECK(heads->s == 40);
  CHECK(heads->d == 64);
  CHECK(heads->scale == 0.125f);
  CHECK(heads->causal);
  const auto grouped = sizesOf({2, 2, 48, cuda::kMaxAttentionHeadDim}, {2, 2, 24, cuda::kMaxAttentionHeadDim}, true);
  REQUIRE(grouped);
  CHECK(grouped->n == 4);
  CHECK(grouped->r == 48);
  CHECK(grouped->s == 24);
  const auto plain = sizesOf({33, 7}, {50, 7}, false, ir::DType::F16);
  REQUIRE(plain);
  CHECK(plain->n == 1);
  CHECK_FALSE(plain->causal);
}

TEST_CASE("the attention kernels leave to the host what they do not take", "[cuda][attention]") {
  // Over the bound: cpu::fusedAttention computes it on the host.
  CHECK_FALSE(sizesOf({1, 8, cuda::kMaxAttentionHeadDim + 1}, {1, 8, cuda::kMaxAttentionHeadDim + 1}, true));
  // Operands cpu::fusedAttention rejects, so that its error names them.
  CHECK_FALSE(sizesOf({1, 50, 8}, {1, 24, 8}, true));   // causal, r not a multiple of s
  CHECK_FALSE(sizesOf({1, 4, 8}, {1, 0, 8}, false));    // no keys
  CHECK_FALSE(sizesOf({2, 4, 8}, {3, 4, 8}, false));    // other leading dimensions
  CHECK_FALSE(sizesOf({2, 4, 8}, {2, 4, 16}, false));   // other d
  CHECK_FALSE(sizesOf({8}, {8}, false));                // rank 1
  CHECK_FALSE(sizesOf({2, 4, 8}, {2, 4, 8}, false, ir::DType::I32));
  const Tensor q = typed(ir::DType::F32, {4, 8}), k = typed(ir::DType::F32, {4, 8});
  CHECK_FALSE(cuda::attentionSizes(q, k, typed(ir::DType::F32, {5, 8}), {}));   // k, v of other shapes
  CHECK_FALSE(cuda::attentionSizes(q, k, typed(ir::DType::BF16, {4, 8}), {}));  // mixed types
}

TEST_CASE("the attention backward needs dOut like q and an f32 lse of q's rows", "[cuda][attention]") {
  const Tensor q = typed(ir::DType::BF16, {2, 6, 8}), k = typed(ir::DType::BF16, {2, 3, 8});
  const cpu::AttentionOptions causal{0.5, true};
  const Tensor lse = typed(ir::DType::F32, {2, 6});
  CHECK(cuda::attentionGradSizes(q, k, k, typed(ir::DType::BF16, {2, 6, 8}), lse, causal));
  CHECK_FALSE(cuda::attentionGradSizes(q, k, k, typed(ir::DType::F32, {2, 6, 8}), lse, causal));
  CHECK_FALSE(cuda::attentionGradSizes(q, k, k, typed(ir::DType::BF16, {2, 6, 4}), lse, causal));
  CHECK_FALSE(cuda::attentionGradSizes(q, k, k, q, typed(ir::DType::BF16, {2, 6}), causal));
  CHECK_FALSE(cuda::attentionGradSizes(q, k, k, q, typed(ir::DType::F32, {2, 3}), causal));
}

TEST_CASE("the attention launchers reject sizes before any launch", "[cuda][attention]") {
  cuda::AttentionSizes sizes;
  sizes.n = 1, sizes.r = 4, sizes.s = 4, sizes.d = cuda::kMaxAttentionHeadDim + 1;
  CHECK_THROWS_AS(cuda::attentionForward(cuda::FloatFormat::kF32, nullptr, nullptr, nullptr, nullptr, nullptr, sizes,
                                         nullptr),
                  std::invalid_argument);
  sizes.d = 8, sizes.r = 6, sizes.causal = true;
  CHECK_THROWS_WITH(cuda::attentionBackward(cuda::FloatFormat::kBF16, nullptr, nullptr, nullptr, nullptr, nullptr,
                                            nullptr, nullptr, nullptr, nullptr, sizes, nullptr),
                    Catch::Contains("multiple of the keys"));
  sizes.r = 4;  // right sizes, null pointers
  CHECK_THROWS_WITH(cuda::attentionForward(cuda::FloatFormat::kF16, nullptr, nullptr, nullptr, nullptr, nullptr,
                                           sizes, nullptr),
                    Catch::Contains("null device pointer"));
}

TEST_CASE("MESHFLOW_CUDA_FUSE=0 turns the fused attention off with the fused groups", "[cuda][attention]") {
  const char* before = std::getenv("MESHFLOW_CUDA_FUSE");
  const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
  setenv("MESHFLOW_CUDA_FUSE", "0", 1);
  CHECK_FALSE(cuda::fusionRequested());
  setenv("MESHFLOW_CUDA_FUSE", "1", 1);
  CHECK(cuda::fusionRequested());
  unsetenv("MESHFLOW_CUDA_FUSE");
  CHECK(cuda::fusionRequested());
  if (saved) setenv("MESHFLOW_CUDA_FUSE", saved->c_str(), 1);
}
