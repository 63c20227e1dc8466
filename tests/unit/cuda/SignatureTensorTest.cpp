// A call signature survives its trip as an i32 tensor, and a tensor that is
// none is refused instead of misread.
#include <catch2/catch.hpp>

#include "runtime/cuda/SignatureTensor.h"

namespace rt = meshflow::runtime;
using Catch::Matchers::Contains;

TEST_CASE("a call signature travels as an i32 tensor", "[cuda][nccl]") {
  rt::CallSignature call;
  call.op = "broadcast";
  call.group = {5, 0, 3};
  call.root = 3;
  call.operandsAgree = false;
  call.operands = {{true, meshflow::ir::DType::BF16, {3'000'000'000LL, 7}},
                   {false, meshflow::ir::DType::F32, {}},
                   {true, meshflow::ir::DType::I32, {}}};
  const rt::CallSignature back = rt::cuda::signatureOf(rt::cuda::signatureTensor(call));
  CHECK(back.op == call.op);
  CHECK(back.group == call.group);
  CHECK(back.root == 3);
  CHECK_FALSE(back.operandsAgree);
  CHECK(back.operands == call.operands);
  CHECK_FALSE(rt::callDifference(5, call, 0, back));
}

TEST_CASE("a tensor that is no signature is refused", "[cuda][nccl]") {
  CHECK_THROWS_WITH(rt::cuda::signatureOf(rt::Tensor::zeros({3})),
                    Contains("rank-1 i32 tensor, not f32[3]"));
  CHECK_THROWS_WITH(rt::cuda::signatureOf(rt::Tensor::fromI32({2}, {9, 1})),
                    Contains("ends too early"));
}
