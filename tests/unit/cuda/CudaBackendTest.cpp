// The cuda backend's host-side logic, without a GPU: the device mapping, which
// ops run on the GPU, the factory train() reaches it through, and the error
// it gives at once on a machine without a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "runtime/GpuHosts.h"
#include "runtime/cuda/CudaError.h"
#include "runtime/cuda/CudaHost.h"
#include "runtime/cuda/DeviceAllocator.h"
#include "runtime/cuda/DeviceMapping.h"
#include "runtime/cuda/DeviceProbe.h"
#include "runtime/cuda/KernelPlacement.h"

namespace cuda = meshflow::runtime::cuda;
namespace ir = meshflow::ir;
using meshflow::runtime::Tensor;
using Catch::Matchers::Contains;

namespace {

ir::Op opOf(ir::OpKind kind) {
  ir::Op op;
  op.kind = kind;
  return op;
}

cuda::Placement placed(ir::OpKind kind, std::vector<const Tensor*> in, std::vector<Tensor*> out = {}) {
  return cuda::placementOf(opOf(kind), in, out);
}

}  // namespace

TEST_CASE("virtual devices map onto GPUs in contiguous blocks", "[cuda]") {
  CHECK(cuda::gpuOfDevices(4, 1) == std::vector<int>{0, 0, 0, 0});
  CHECK(cuda::gpuOfDevices(4, 2) == std::vector<int>{0, 0, 1, 1});
  CHECK(cuda::gpuOfDevices(3, 2) == std::vector<int>{0, 0, 1});
  CHECK(cuda::gpuOfDevices(8, 8) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(cuda::gpuOfDevices(2, 4) == std::vector<int>{0, 1});
  CHECK_THROWS_WITH(cuda::gpuOfDevices(0, 1), Contains("at least one device"));
  CHECK_THROWS_WITH(cuda::gpuOfDevices(2, 0), Contains("at least one GPU"));
}

TEST_CASE("a job's processes take the GPUs of their machine by local rank", "[cuda]") {
  CHECK(cuda::gpuOfLocalRank(0, 8) == 0);
  CHECK(cuda::gpuOfLocalRank(7, 8) == 7);
  CHECK(cuda::gpuOfLocalRank(3, 2) == 1);  // more processes than GPUs: they share in turn
  CHECK(cuda::gpuOfLocalRank(4, 1) == 0);
  CHECK_THROWS_WITH(cuda::gpuOfLocalRank(-1, 2), Contains("local rank is -1"));
  CHECK_THROWS_WITH(cuda::gpuOfLocalRank(0, 0), Contains("at least one GPU"));
}

TEST_CASE("matmuls of one float type and the training ops, f32 or half, run on the GPU", "[cuda]") {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({3, 4});
  Tensor ah = a.castTo(ir::DType::BF16), bh = b.castTo(ir::DType::BF16), af16 = a.castTo(ir::DType::F16);
  Tensor ids = Tensor::fromI32({2}, {0, 1});
  using K = ir::OpKind;
  CHECK(placed(K::MatMul, {&a, &b}) == cuda::Placement::kGpu);
  CHECK(placed(K::MatMul, {&ah, &bh}) == cuda::Placement::kGpu);
  CHECK(placed(K::MatMul, {&ah, &b}) == cuda::Placement::kHost);  // mixed types: the cpu kernel widens
  for (K kind : {K::Add, K::Sub, K::Mul, K::Div}) CHECK(placed(kind, {&a, &a}) == cuda::Placement::kGpu);
  for (K kind : {K::Gelu, K::Relu, K::Softmax, K::Dropout, K::Exp, K::Scale})
    CHECK(placed(kind, {&a}) == cuda::Placement::kGpu);
  CHECK(placed(K::Embedding, {&a, &ids}) == cuda::Placement::kGpu);
  CHECK(placed(K::Gelu, {&af16}) == cuda::Placement::kGpu);  // widened on the GPU, rounded once
  CHECK(placed(K::LayerNormGrad, {&ah, &ah, &ah}) == cuda::Placement::kGpu);
  for (K kind : {K::Reshape, K::Cast, K::TopKGate}) CHECK(placed(kind, {&a}) == cuda::Placement::kHost);
  for (K kind : {K::Sum, K::Mean}) CHECK(placed(kind, {&a}) == cuda::Placement::kGpu);
  Tensor missing;
  CHECK(placed(K::Relu, {&missing}) == cuda::Placement::kHost);  // the cpu kernel names what is missing
  // An output the caller typed half: the cpu kernel computes in f32 and rounds once.
  Tensor halfOut = Tensor::placeholder(ir::DType::BF16, {2, 4});
  CHECK(placed(K::MatMul, {&a, &b}, {&halfOut}) == cuda::Placement::kHost);
  CHECK(placed(K::MatMul, {&ah, &bh}, {&halfOut}) == cuda::Placement::kGpu);
  Tensor wideOut = Tensor::placeholder(ir::DType::F32, {2, 4});  // a half weight's gradient, kept in f32
  CHECK(placed(K::MatMul, {&ah, &bh}, {&wideOut}) == cuda::Placement::kGpu);
  Tensor sumHalf = Tensor::placeholder(ir::DType::BF16, {2, 3}), sumF32 = Tensor::placeholder(ir::DType::F32, {2, 3});
  CHECK(placed(K::Add, {&a, &a}, {&sumHalf}) == cuda::Placement::kGpu);
  CHECK(placed(K::Add, {&a, &a}, {&sumF32}) == cuda::Placement::kGpu);
}

TEST_CASE("layout ops of any element type and casts between float types run on the GPU", "[cuda]") {
  using K = ir::OpKind;
  Tensor a = Tensor::zeros({2, 3}), ah = a.castTo(ir::DType::BF16), ids = Tensor::fromI32({2}, {0, 1});
  for (K kind : {K::Transpose, K::Concat, K::Split, K::SplitHeads, K::MergeHeads}) {
    CHECK(placed(kind, {&a}) == cuda::Placement::kGpu);
    CHECK(placed(kind, {&ah}) == cuda::Placement::kGpu);
    CHECK(placed(kind, {&ids}) == cuda::Placement::kGpu);
  }
  ir::Op cast = opOf(K::Cast);
  cast.attrs["dtype"] = std::string("bf16");
  CHECK(cuda::placementOf(cast, {&a}) == cuda::Placement::kGpu);
  CHECK(cuda::placementOf(cast, {&ah}) == cuda::Placement::kHost);  // the same type: shares the elements
  cast.attrs["dtype"] = std::string("f32");
  CHECK(cuda::placementOf(cast, {&ah}) == cuda::Placement::kGpu);
  CHECK(cuda::placementOf(cast, {&ids}) == cuda::Placement::kHost);  // the cpu kernel names the error
  cast.attrs["dtype"] = std::string("i32");
  CHECK(cuda::placementOf(cast, {&a}) == cuda::Placement::kHost);
  Tensor deep = Tensor::zeros({1, 1, 1, 1, 1, 1, 1, 1, 2});
  CHECK(placed(K::Transpose, {&deep}) == cuda::Placement::kHost);  // rank 9: past the GPU copy's index
}

TEST_CASE("the sums and BroadcastTo run on the GPU along any axes", "[cuda]") {
  Tensor dy = Tensor::zeros({2, 3, 4}), bias = Tensor::zeros({4}), rows = Tensor::zeros({3, 4});
  Tensor inner = Tensor::zeros({2, 1, 4});
  for (const Tensor* like : {&bias, &rows, &inner})
    CHECK(placed(ir::OpKind::ReduceToShape, {&dy, like}) == cuda::Placement::kGpu);
  CHECK(placed(ir::OpKind::BroadcastTo, {&inner, &dy}) == cuda::Placement::kGpu);
}

TEST_CASE("an update whose step is skipped (NaN scale) runs on the host", "[cuda]") {
  Tensor w = Tensor::zeros({3}), m = Tensor::zeros({3}), v = Tensor::zeros({3});
  Tensor one = Tensor::scalar(1.0f), nan = Tensor::scalar(std::numeric_limits<float>::quiet_NaN());
  CHECK(placed(ir::OpKind::AdamUpdate, {&w, &w, &one, &m, &v}) == cuda::Placement::kGpu);
  CHECK(placed(ir::OpKind::AdamUpdate, {&w, &w, &nan, &m, &v}) == cuda::Placement::kHost);
  CHECK(placed(ir::OpKind::SgdUpdate, {&w, &w, &nan, &m}) == cuda::Placement::kHost);
}

TEST_CASE("without a GPU the cuda backend fails at once, naming CUDA", "[cuda]") {
  if (cuda::deviceCount() > 0) {
    cuda::CudaHost host({2, std::chrono::milliseconds(1000)});
    CHECK(host.gpus().size() == 2);
    return;
  }
  CHECK_THROWS_AS(cuda::CudaHost({2, std::chrono::milliseconds(1000)}), cuda::CudaError);
  CHECK_THROWS_AS(cuda::CudaKernels(0), cuda::CudaError);
  CHECK_THROWS_AS(cuda::makeDeviceMemory(0, 0, 0, true), cuda::CudaError);
  CHECK_THROWS_WITH(cuda::CudaHost({2, std::chrono::milliseconds(1000)}), Contains("no CUDA device is available"));
  cuda::installCudaBackend();
  CHECK_THROWS_AS(meshflow::runtime::makeGpuHost({2}), meshflow::runtime::GpuUnavailable);
  CHECK_THROWS_WITH(meshflow::runtime::makeGpuHost({2}), Contains("CUDA"));
}

TEST_CASE("train() reaches GPUs only through an installed factory", "[cuda]") {
  namespace rt = meshflow::runtime;
  rt::installGpuHosts(nullptr);
  CHECK_FALSE(rt::gpuHostsInstalled());
  CHECK_THROWS_WITH(rt::makeGpuHost({1}), Contains("no CUDA backend is available"));
  int asked = 0;
  rt::installGpuHosts([&](const rt::GpuHostRequest& request) -> std::unique_ptr<rt::DeviceHost> {
    asked = request.devices;
    throw std::runtime_error("the driver is too old");
  });
  CHECK_THROWS_AS(rt::makeGpuHost({3}), rt::GpuUnavailable);
  CHECK(asked == 3);
  rt::installGpuHosts(nullptr);
}
