// passes/FusedKernels.h on the standard library's models: the attention,
// RMSNorm and SwiGLU kernels a GPU stack fuses are found where the layers
// trace them, and a device with DeviceSpec::fusedKernels prices them as one
// kernel each (issue 18: Meta's Llama 3 405B plan under our cost model).
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "interp/Tracing.h"
#include "tests/unit/TracedModel.h"
#include "ir/Cluster.h"
#include "ir/OpCost.h"
#include "meshflow/meshflow.h"
#include "passes/CostModel.h"
#include "passes/FusedKernels.h"
#include "passes/Planner.h"

using namespace meshflow;
using passes::FusedKind;

namespace {

ir::Graph traced(const std::string& model) { return test::tracedModel(model); }

const char* kSmallLlama =
    "llama(layers = 2, hidden = 256, heads = 8, kv_heads = 2, ffn = 512, seq = 512, vocab = 512)";

long countKind(const passes::FusedKernels& f, FusedKind kind) {
  return std::count(f.kindOfOp.begin(), f.kindOfOp.end(), kind);
}

// The first op of `kind` in scope `scope`.
ir::OpId firstOp(const ir::Graph& g, ir::OpKind kind, const std::string& scope) {
  for (ir::OpId id = 0; id < g.ops().size(); ++id)
    if (g.op(id).kind == kind && g.op(id).scope == scope) return id;
  FAIL("no such op in " << scope);
  return 0;
}

// The matrix product upstream of op `id` along first inputs (q·kᵀ of a softmax).
ir::OpId productBefore(const ir::Graph& g, ir::OpId id) {
  do id = g.value(g.op(id).inputs[0]).producer;
  while (g.op(id).kind != ir::OpKind::MatMul);
  return id;
}

// The matrix product downstream of op `id` (p·v of a softmax).
ir::OpId productAfter(const ir::Graph& g, ir::OpId id) {
  while (g.op(++id).kind != ir::OpKind::MatMul) {
  }
  return id;
}

ir::DeviceSpec h100(bool fused) {
  ir::DeviceSpec d{"H100", 80e9, 989e12, 3350e9};
  d.fusedKernels = fused;
  return d;
}

}  // namespace

TEST_CASE("the fused kernels are found where the stdlib layers trace them", "[models][fused]") {
  ir::Graph llama = traced(kSmallLlama);
  passes::FusedKernels f = passes::findFusedKernels(llama);
  // Per block: attention is q·kᵀ, a reshape, scale, mask, softmax, a reshape
  // and p·v (grouped-query); two RMSNorms of six ops and a reshape; SwiGLU's
  // sigmoid and two products. The final norm is one more RMSNorm.
  CHECK(countKind(f, FusedKind::kAttention) == 2 * 7);
  CHECK(countKind(f, FusedKind::kRmsNorm) == 5 * 6);
  CHECK(countKind(f, FusedKind::kSwiGlu) == 2 * 3);
  const ir::OpId softmax = firstOp(llama, ir::OpKind::Softmax, "block0.self_attention");
  CHECK(f.isInternal(llama.op(softmax).outputs[0]));  // the scores never reach memory
  CHECK(f.causalProduct[productBefore(llama, softmax)]);
  CHECK(f.causalProduct[productAfter(llama, softmax)]);
  const ir::OpId rsqrt = firstOp(llama, ir::OpKind::Rsqrt, "block0.attention_norm");
  CHECK(f.isInternal(llama.op(rsqrt).outputs[0]));
  CHECK(f.keptForBackward[llama.op(rsqrt).outputs[0]]);  // rstd, what the backward reads
  const ir::OpId qkv = firstOp(llama, ir::OpKind::MatMul, "block0.self_attention.qkv");
  CHECK_FALSE(f.fused(qkv));
  CHECK_FALSE(f.isInternal(llama.op(qkv).outputs[0]));

  // Multi-head attention of the GPT: q·kᵀ, scale, mask, softmax, p·v.
  passes::FusedKernels gpt = passes::findFusedKernels(
      traced("gpt(layers = 2, hidden = 64, heads = 2, seq = 16, vocab = 64)"));
  CHECK(countKind(gpt, FusedKind::kAttention) == 2 * 5);
  CHECK(countKind(gpt, FusedKind::kRmsNorm) == 0);
  CHECK(countKind(gpt, FusedKind::kSwiGlu) == 0);
}

TEST_CASE("a fused kernel moves only what enters and leaves it", "[models][fused]") {
  ir::Graph llama = traced(kSmallLlama);
  passes::FusedKernels f = passes::findFusedKernels(llama);
  const ir::OpId softmax = firstOp(llama, ir::OpKind::Softmax, "block0.self_attention");
  const double unfused = passes::opComputeTime(llama, softmax, 4, 1, h100(false));
  const double fused = passes::opComputeTime(llama, softmax, 4, 1, h100(true), &f);
  CHECK(fused < 0.1 * unfused);  // its FLOPs alone: no scores read or written
  // The products of causal attention: half the blocks, and the backward's
  // recomputed scores (5 products against 4), on a compute-bound size.
  ir::Graph big = traced(
      "llama(layers = 1, hidden = 4096, heads = 32, kv_heads = 8, ffn = 8192, seq = 4096, vocab = 512)");
  passes::FusedKernels bf = passes::findFusedKernels(big);
  const ir::OpId bigSoftmax = firstOp(big, ir::OpKind::Softmax, "block0.self_attention");
  const ir::OpId pv = productAfter(big, bigSoftmax);
  REQUIRE(bf.causalProduct[pv]);
  const double plain = passes::opComputeTime(big, pv, 1, 1, h100(false));
  const double flash = passes::opComputeTime(big, pv, 1, 1, h100(true), &bf);
  const passes::FusedProductWork work = passes::fusedProductWork(true);
  CHECK(work.forward == 0.5);
  CHECK(work.backward == 0.625);
  CHECK(flash < plain);
  // Compute-bound once the scores stay on chip: FlashAttention's FLOPs at the
  // cost model's efficiency.
  const ir::OpCost c = ir::opCost(big, pv, 1);
  const double flashFlops = work.forward * c.flops + work.backward * c.backwardFlops;
  CHECK(flash == Approx(flashFlops / (989e12 * passes::kComputeEfficiency)).epsilon(0.02));
}

TEST_CASE("a device with fused kernels keeps no attention scores and plans faster",
          "[models][fused]") {
  ir::Graph llama = traced(kSmallLlama);
  ir::Cluster cluster;
  cluster.nodes = 1;
  cluster.devicesPerNode = 4;
  cluster.device = h100(false);
  cluster.intraNode = {450e9, 2e-6};
  cluster.interNode = {400e9, 10e-6};
  passes::PlanRequest request;
  request.globalBatch = 16;
  request.stages = 1;
  request.dataParallel = 4;  // each device: the whole layers, 4 samples
  request.microbatches = 1;
  request.recompute = "none";
  ir::Plan plain = passes::planTraining(llama, cluster, request);
  cluster.device.fusedKernels = true;
  ir::Plan fused = passes::planTraining(llama, cluster, request);
  const double plainHeld = plain.stages[0].costs.heldActivationBytes;
  const double fusedHeld = fused.stages[0].costs.heldActivationBytes;
  INFO("held per microbatch: " << plainHeld << " B unfused, " << fusedHeld << " B fused");
  // What the scores took: 2 layers x 4 samples x 8 heads x 512² in bf16.
  CHECK(plainHeld - fusedHeld >= 2.0 * 4 * 8 * 512 * 512 * 2);
  CHECK(fused.stepTime < plain.stepTime);
  // Selective recomputation has nothing left to drop.
  request.recompute = "selective";
  ir::Plan selective = passes::planTraining(llama, cluster, request);
  CHECK(selective.stages[0].costs.heldActivationBytes == Approx(fusedHeld).epsilon(0.02));
}
