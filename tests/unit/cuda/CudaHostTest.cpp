// What the cuda backend does without a GPU: the probe answers 0 devices and
// says why, the backend refuses to start with a clear error, and every kernel
// and GEMM checks its arguments on the host before anything reaches a GPU.
// (The kernels themselves are checked on a GPU by tests/gpu/KernelParity.cpp.)
#include <catch2/catch.hpp>

#include <stdexcept>

#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/CudaHost.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceProbe.h"
#include "runtime/cuda/Gemm.h"
#include "runtime/cuda/Kernels.h"
#include "runtime/cuda/TrainingKernels.h"

namespace cuda = meshflow::runtime::cuda;
using Catch::Matchers::Contains;

TEST_CASE("the probe counts devices without crashing, and says why there are none", "[cuda]") {
  int count = cuda::deviceCount();
  REQUIRE(count >= 0);
  if (count > 0) {
    CHECK(cuda::noDeviceReason().empty());
    CHECK_NOTHROW(cuda::requireDevice(0));
    CHECK_THROWS_WITH(cuda::requireDevice(count), Contains("does not exist"));
    return;
  }
  CHECK_FALSE(cuda::noDeviceReason().empty());
  CHECK_THROWS_AS(cuda::requireDevice(0), cuda::CudaError);
  CHECK_THROWS_WITH(cuda::requireDevice(0), Contains("no CUDA device is available") &&
                                                Contains("use --backend cpu or mpi"));
  // Nothing that needs a device gets one.
  CHECK_THROWS_AS(cuda::deviceInfo(0), cuda::CudaError);
  CHECK_THROWS_AS(cuda::makeDeviceMemory(0, 0, 0), cuda::CudaError);
}

TEST_CASE("a failed CUDA call names the call, the error and the place", "[cuda]") {
  CHECK_NOTHROW(MESHFLOW_CUDA_CHECK(0));
  // 2 is cudaErrorMemoryAllocation.
  CHECK_THROWS_WITH(cuda::checkCuda(2, "cudaMalloc(&p, n)", "f.cpp", 7),
                    Contains("cudaErrorMemoryAllocation") && Contains("cudaMalloc(&p, n)") && Contains("f.cpp:7"));
  // 3 is CUBLAS_STATUS_ALLOC_FAILED.
  CHECK_THROWS_WITH(cuda::checkCublas(3, "cublasCreate(&h)", "g.cpp", 9),
                    Contains("CUBLAS_STATUS_ALLOC_FAILED") && Contains("g.cpp:9"));
}

TEST_CASE("GEMM shapes are checked before cuBLAS sees them", "[cuda]") {
  CHECK_NOTHROW(cuda::validateGemm({.batch = 4, .m = 8, .n = 16, .k = 0}));
  CHECK_THROWS_WITH(cuda::validateGemm({.batch = 0, .m = 1, .n = 1, .k = 1}), Contains("batch must be at least 1"));
  CHECK_THROWS_WITH(cuda::validateGemm({.m = -1, .n = 1, .k = 1}), Contains("m is negative"));
  CHECK_THROWS_WITH(cuda::validateGemm({.m = 1, .n = 1, .k = std::int64_t{1} << 31}),
                    Contains("k (2147483648) does not fit"));
  // A shared b folds the batch into a's rows, which must fit as well.
  CHECK_THROWS_WITH(cuda::validateGemm({.batch = 1 << 16, .m = 1 << 16, .n = 1, .k = 1, .sharedB = true}),
                    Contains("batch x m"));
  CHECK_NOTHROW(cuda::validateGemm({.batch = 1 << 16, .m = 1 << 16, .n = 1, .k = 1, .transA = true, .sharedB = true}));
}

TEST_CASE("the kernels check their arguments on the host", "[cuda]") {
  float dummy = 0;
  const float* p = &dummy;
  float* q = &dummy;
  // Nothing to do is no launch, so it works without a GPU.
  CHECK_NOTHROW(cuda::add(nullptr, nullptr, nullptr, 0, 1, nullptr));
  CHECK_NOTHROW(cuda::softmax(nullptr, nullptr, 0, 8, 1.0f, true, nullptr));
  CHECK_THROWS_WITH(cuda::add(p, p, q, -1, 1, nullptr), Contains("cuda::add: negative element count -1"));
  CHECK_THROWS_WITH(cuda::mul(p, p, q, 12, 5, nullptr), Contains("5 elements do not repeat over 12"));
  CHECK_THROWS_WITH(cuda::gelu(p, nullptr, 4, nullptr), Contains("cuda::gelu: a null device pointer"));
  CHECK_THROWS_WITH(cuda::softmax(p, q, 3, 0, 1.0f, false, nullptr), Contains("3 rows of width 0"));
  CHECK_THROWS_WITH(cuda::softmax(p, q, 10, 4, 1.0f, true, nullptr),
                    Contains("a causal mask needs [..., s, s] scores, got 10 rows of width 4"));
  CHECK_THROWS_WITH(cuda::layerNorm(p, p, nullptr, q, 2, 4, 1e-5, nullptr), Contains("null device pointer"));
}

TEST_CASE("the half-precision and spread-sum kernels check their arguments on the host", "[cuda]") {
  using F = cuda::FloatFormat;
  float dummy = 0, scale = 1;
  void* q = &dummy;
  double scratch = 0;
  CHECK_THROWS_WITH(cuda::layerNorm(F::kBF16, q, q, nullptr, q, 2, 4, 1e-5, nullptr),
                    Contains("cuda::layerNorm: a null device pointer"));
  CHECK_THROWS_WITH(cuda::layerNormGrad(F::kF16, q, q, q, q, F::kF32, nullptr, F::kF32, q, 2, 4, 1e-5, &scratch, nullptr),
                    Contains("cuda::layerNormGrad: a null device pointer"));
  // All 4,096 elements into one output: 64 chunks of 64, which need scratch.
  cuda::SumIndex one;
  one.summedRank = 1;
  one.summed[0] = 4096;
  one.summedStrides[0] = 1;
  CHECK(cuda::sumOverScratch(one) == 64);
  CHECK_THROWS_WITH(cuda::sumOver(F::kBF16, q, F::kF32, q, one, 1.0, nullptr, nullptr), Contains("needs sumOverScratch"));
  // The global norm's blocks: 64 elements a thread, 1 to 1,024 blocks by the size alone.
  CHECK(cuda::addSquaresScratch(1) == 1);
  CHECK(cuda::addSquaresScratch(1 << 20) == 64);
  CHECK(cuda::addSquaresScratch((1 << 20) + 1) == 65);
  CHECK(cuda::addSquaresScratch(std::int64_t{1} << 40) == 1024);
  CHECK_THROWS_WITH(cuda::addSquares(F::kF16, q, 8, &scratch, nullptr, nullptr),
                    Contains("cuda::addSquares: a null device pointer"));
  cuda::UpdateOperands u;
  u.w = u.g = u.m = q;
  u.wOut = q;  // no m'
  CHECK_THROWS_WITH(cuda::sgdUpdate(u, &scale, 8, {0.1f, 0.9f, 0.0f}, nullptr), Contains("cuda::sgdUpdate: a null device pointer"));
  CHECK_NOTHROW(cuda::adamUpdate(cuda::UpdateOperands{}, &scale, 0, {}, nullptr));  // nothing to do: no launch
}

TEST_CASE("MESHFLOW_CUDA_MEMORY picks managed or device memory, and names itself when wrong", "[cuda]") {
  CHECK(cuda::managedMemoryRequested(nullptr));
  CHECK(cuda::managedMemoryRequested(""));
  CHECK(cuda::managedMemoryRequested("managed"));
  CHECK_FALSE(cuda::managedMemoryRequested("device"));
  CHECK_THROWS_WITH(cuda::managedMemoryRequested("pinned"),
                    Contains("MESHFLOW_CUDA_MEMORY is 'pinned'") && Contains("'managed' (the default) or 'device'"));
}
