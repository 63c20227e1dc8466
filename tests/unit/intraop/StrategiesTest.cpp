// The strategy families on small ops: names, specs and communication costs.
#include <catch2/catch.hpp>

#include <set>

#include "passes/Collectives.h"
#include "passes/CostModel.h"
#include "passes/strategies/Strategy.h"
#include "tests/unit/intraop/Models.h"

using namespace meshflow;
using passes::Collective;
using passes::collectiveCost;

namespace {

std::vector<passes::Strategy> matmulOn(const ir::LogicalMesh& mesh, bool needsGradA) {
  static test::GraphBuilder b;
  b = test::GraphBuilder();
  auto x = b.input("x", "f32[batch, 64]");
  auto w = b.parameter("w", "f32[64, 32]");
  b.op(ir::OpKind::MatMul, {x, w});
  passes::OpContext ctx{b.graph, 2, 16, mesh, {needsGradA, true}, {}};
  return passes::strategiesFor(ctx);
}

const passes::Strategy* find(const std::vector<passes::Strategy>& all, const std::string& prefix) {
  for (const auto& s : all) {
    if (s.name.starts_with(prefix)) return &s;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("matmul on a 2-D mesh has every strategy of Alpa's dot handler") {
  ir::LogicalMesh mesh = test::nvlinkMesh(2, 2);
  auto all = matmulOn(mesh, false);
  CHECK(all.size() == 16);  // (3 loops + none)^2, all dividing the shapes
  double out = 16.0 * 32 * 4, weight = 64.0 * 32 * 4;
  // SS = SR x RS: no forward communication; the weight gradient syncs over axis 0.
  const auto* ss = find(all, "S0S1 = S0R x RS1");
  REQUIRE(ss);
  CHECK(ss->communication ==
        Approx(collectiveCost(Collective::kAllReduce, weight / 2, ir::MeshAxes::k0, mesh)));
  CHECK(ss->parallelism == 4);
  // SR = SS x SR: all-reduce of the output over axis 1.
  const auto* sr = find(all, "S0R = S0S1 x S1R [all-reduce 1]");
  REQUIRE(sr);
  CHECK(sr->communication ==
        Approx(collectiveCost(Collective::kAllReduce, out / 2, ir::MeshAxes::k1, mesh) +
               collectiveCost(Collective::kAllReduce, weight / 2, ir::MeshAxes::k0, mesh)));
  // RS = RS x SS: all-reduce over axis 0; the weight is fully sharded, no sync.
  const auto* rs = find(all, "RS1 = RS0 x S0S1 [all-reduce 0]");
  REQUIRE(rs);
  CHECK(rs->gradientSync[1] == ir::MeshAxes::kNone);
  // 1-D mixed: both axes on one loop.
  CHECK(find(all, "S01R = S01R x RR"));
  CHECK(find(all, "RS01 = RR x RS01"));
  CHECK(find(all, "RR = RS01 x S01R [all-reduce 01]"));
  // Megatron column and row parallel, and data parallel over the whole mesh.
  CHECK(find(all, "RS1 = RR x RS1")->communication == 0);
  CHECK(find(all, "S01R = S01R x RR")->gradientSync[1] == ir::MeshAxes::k01);
}

TEST_CASE("a needed input gradient prices the backward all-reduce of column parallelism") {
  ir::LogicalMesh mesh = test::nvlinkMesh(1, 4);
  auto column = *find(matmulOn(mesh, true), "RS1 = RR x RS1");
  CHECK(column.communication ==
        Approx(collectiveCost(Collective::kAllReduce, 16.0 * 64 * 4, ir::MeshAxes::k1, mesh)));
  CHECK(find(matmulOn(mesh, false), "RS1 = RR x RS1")->communication == 0);
}

TEST_CASE("batched attention matmuls split batch and heads") {
  test::GraphBuilder b;
  auto q = b.input("q", "f32[batch, 8, 16, 4]");
  auto k = b.input("k", "f32[batch, 8, 16, 4]");
  b.op(ir::OpKind::MatMul, {q, k}, {{"transpose_b", std::int64_t{1}}});
  ir::LogicalMesh mesh = test::nvlinkMesh(2, 2);
  passes::OpContext ctx{b.graph, 2, 4, mesh, {false, false}, {}};
  auto all = passes::strategiesFor(ctx);
  CHECK(find(all, "S0S1RR = S0S1RR x S0S1RR"));  // batch x heads
  CHECK(find(all, "RS01RR = RS01RR x RS01RR"));  // heads on the whole mesh
}

TEST_CASE("bias add, layer_norm, embedding, cross_entropy and layout strategies") {
  ir::LogicalMesh mesh = test::nvlinkMesh(1, 4);
  test::GraphBuilder b;
  auto x = b.input("x", "f32[batch, 8, 64]");
  auto bias = b.parameter("bias", "f32[64]", "zeros");
  b.op(ir::OpKind::Add, {x, bias});  // op 2
  auto bias2 = b.input("y", "f32[batch, 8, 64]");
  (void)bias2;
  passes::OpContext add{b.graph, 2, 4, mesh, {false, true}, {}};
  auto adds = passes::strategiesFor(add);
  // Data parallel bias add: the bias gradient is all-reduced.
  const auto* dp = find(adds, "S1RR = S1RR x R");
  REQUIRE(dp);
  CHECK(dp->communication == Approx(collectiveCost(Collective::kAllReduce, 64 * 4, ir::MeshAxes::k1, mesh)));
  CHECK(find(adds, "RRS1 = RRS1 x S1")->communication == 0);

  test::GraphBuilder e;
  auto table = e.parameter("wte", "f32[128, 64]");
  auto ids = e.input("ids", "i32[batch, 8]");
  e.op(ir::OpKind::Embedding, {table, ids});
  passes::OpContext emb{e.graph, 2, 4, mesh, {true, false}, {}};
  auto embs = passes::strategiesFor(emb);
  CHECK(find(embs, "RRS1 = RS1 x RR")->communication == 0);
  CHECK(find(embs, "RRR = S1R x RR [all-reduce 1]"));  // vocabulary parallel

  test::GraphBuilder c;
  auto logits = c.input("logits", "f32[batch, 128]");
  auto labels = c.input("labels", "i32[batch]");
  c.op(ir::OpKind::CrossEntropy, {logits, labels});
  passes::OpContext ce{c.graph, 2, 4, mesh, {true, false}, {}};
  auto ces = passes::strategiesFor(ce);
  CHECK(find(ces, "()+P1 = S1R x S1")->communication == 0);
  CHECK(find(ces, "() = RS1 x R [all-reduce stats 1]")->communication ==
        Approx(collectiveCost(Collective::kAllReduce, 3 * 4 * 4, ir::MeshAxes::k1, mesh)));

  test::GraphBuilder s;
  auto qkv = s.input("qkv", "f32[batch, 8, 96]");
  s.ops(ir::OpKind::Split, {qkv}, {{"axis", std::int64_t{2}}, {"sizes", std::vector<std::int64_t>{32, 32, 32}}});
  passes::OpContext split{s.graph, 1, 4, mesh, {false}, {}};
  CHECK(find(passes::strategiesFor(split), "RRS1, RRS1, RRS1 = RRS1 [interleaved]"));
}

TEST_CASE("op compute time: matrix and vector rates, kernel latency") {
  test::GraphBuilder b;
  auto x = b.input("x", "f32[batch, 64]");
  auto w = b.parameter("w", "f32[64, 32]");
  auto y = b.op(ir::OpKind::MatMul, {x, w});
  b.op(ir::OpKind::Gelu, {y});
  ir::DeviceSpec d{"test", 1e9, 1e12, 1e30};  // compute-bound: bytes are free
  double matmul = passes::opComputeTime(b.graph, 2, 8, 1, d);
  double gelu = passes::opComputeTime(b.graph, 3, 8, 1, d);
  // Without vectorFlops every op runs at the peak; without a latency, no fixed cost.
  CHECK(matmul == Approx(3 * 2.0 * 8 * 64 * 32 / (1e12 * passes::kComputeEfficiency)));
  d.vectorFlops = 1e10;
  CHECK(passes::opComputeTime(b.graph, 2, 8, 1, d) == Approx(matmul));
  CHECK(passes::opComputeTime(b.graph, 3, 8, 1, d) == Approx(gelu * 100));
  d.kernelLatency = 1e-6;
  // matmul: its kernel and one backward kernel for w (x is an input); gelu: two.
  CHECK(passes::opComputeTime(b.graph, 2, 8, 1, d) == Approx(matmul + 2e-6));
  CHECK(passes::opComputeTime(b.graph, 3, 8, 1, d) == Approx(gelu * 100 + 2e-6));
  CHECK(passes::opComputeTime(b.graph, 0, 8, 1, d) == 0);  // an input runs no kernel
}

TEST_CASE("roofline and parameter memory") {
  ir::DeviceSpec d = test::v100();
  CHECK(passes::rooflineTime(125e12 * passes::kComputeEfficiency, 0, d) == Approx(1.0));
  CHECK(passes::rooflineTime(0, 900e9, d) == Approx(1.0));
  ir::LogicalMesh mesh = test::nvlinkMesh(2, 2);
  passes::MemoryOptions adam;
  auto s0r = ir::ShardingSpec::parse("S0R");
  auto m = passes::parameterMemory(256, ir::DType::F32, s0r, 2, mesh, adam);
  CHECK(m.weights == 512);
  CHECK(m.gradients == 512);
  CHECK(m.optimizerState == 1024);
  adam.shardOptimizerState = true;
  m = passes::parameterMemory(256, ir::DType::F32, s0r, 2, mesh, adam);
  CHECK(m.gradients == 256);
  CHECK(m.optimizerState == 512);
}

TEST_CASE("mixed precision keeps an fp32 gradient and master copy beside f16 weights") {
  ir::LogicalMesh mesh = test::nvlinkMesh(2, 2);
  passes::MemoryOptions adam;
  auto m = passes::parameterMemory(256, ir::DType::F16, ir::ShardingSpec::parse("RR"), 4, mesh, adam);
  CHECK(m.weights == 512);
  CHECK(m.gradients == 256 * 4);        // accumulated in fp32 (Megatron's main_grad)
  CHECK(m.optimizerState == 256 * 12);  // master weight, two moments
  CHECK(m.total() / 256 == 18);         // theoretical_memory_usage.py's 18 bytes with Adam
}

namespace {

// x[batch, 4, 8] and top-2 gates over 4 experts, dispatched with capacity 2,
// through batched experts w[4, 8, 16], combined back.
struct MoeOps {
  test::GraphBuilder b;
  ir::OpId dispatch = 0, combine = 0;
};

void buildMoe(MoeOps& m) {
  auto x = m.b.input("x", "f32[batch, 4, 8]");
  auto logits = m.b.input("logits", "f32[batch, 4, 4]");
  auto gates = m.b.op(ir::OpKind::TopKGate, {logits}, {{"k", std::int64_t{2}}});
  ir::Attributes capacity = {{"capacity", std::int64_t{2}}};
  auto slots = m.b.op(ir::OpKind::MoeDispatch, {x, gates}, capacity);
  m.dispatch = m.b.graph.value(slots).producer;
  auto w = m.b.parameter("w", "f32[4, 8, 8]");
  auto y = m.b.op(ir::OpKind::MatMul, {slots, w});
  m.combine = m.b.graph.value(m.b.op(ir::OpKind::MoeCombine, {y, gates}, capacity)).producer;
}

}  // namespace

TEST_CASE("moe dispatch and combine offer expert parallelism priced with an all-to-all each way") {
  MoeOps m;
  buildMoe(m);
  ir::LogicalMesh mesh = test::nvlinkMesh(2, 2);
  const std::int64_t batch = 8;
  double slotBytes = 4.0 * (batch * 2) * 8 * 4;  // [E, B*C, h] f32
  for (ir::OpId id : {m.dispatch, m.combine}) {
    passes::OpContext ctx{m.b.graph, id, batch, mesh, {true, true}, {}};
    auto all = passes::strategiesFor(ctx);
    INFO(ir::opName(m.b.graph.op(id).kind));
    bool dispatch = id == m.dispatch;
    // Over mesh axis 0: tokens and gates split over the batch, slots over the experts.
    const auto* ep = find(
        all, dispatch ? "S0RR = S0RR x S0RR [all-to-all 0]" : "S0RR = S0RR x S0RR [all-to-all 0]");
    REQUIRE(ep);
    CHECK(ep->communication ==
          Approx(2 * collectiveCost(Collective::kAllToAll, slotBytes / 2, ir::MeshAxes::k0, mesh)));
    CHECK(ep->communication > 0);
    CHECK(ep->parallelism == 2);
    REQUIRE(find(all, "S01RR = S01RR x S01RR [all-to-all 01]"));
    // The batch split with no exchange is offered too (slots split over groups).
    CHECK(find(all, dispatch ? "RS0R = S0RR x S0RR" : "S0RR = RS0R x S0RR"));
  }
  // Combine over the experts alone sums the experts' contributions: an all-reduce.
  passes::OpContext ctx{m.b.graph, m.combine, batch, mesh, {true, true}, {}};
  CHECK(find(passes::strategiesFor(ctx), "RRR = S0RR x RRS0 [all-reduce 0]"));
}
