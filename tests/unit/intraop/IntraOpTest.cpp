// Acceptance tests of the intra-op pass on hand-built forward graphs (issue 4).
#include <catch2/catch.hpp>

#include "passes/Collectives.h"
#include "passes/IntraOpPass.h"
#include "tests/unit/intraop/Models.h"

using namespace meshflow;
using passes::Collective;
using passes::collectiveCost;

namespace {

// The decision for the n-th op of `kind` whose scope starts with `scope`.
const passes::OpSharding& decision(const ir::Graph& g, const passes::IntraOpResult& r,
                                   ir::OpKind kind, const std::string& scope, int nth = 0) {
  for (ir::OpId id = 0; id < g.ops().size(); ++id) {
    if (g.op(id).kind == kind && g.op(id).scope.starts_with(scope) && nth-- == 0) {
      return r.ops.at(id);
    }
  }
  FAIL("no op " << ir::opName(kind) << " in " << scope);
  return r.ops.at(0);
}

std::string weightSpec(const ir::Graph& g, const passes::IntraOpResult& r,
                       const std::string& scope, int nth = 0) {
  return decision(g, r, ir::OpKind::MatMul, scope, nth).inputs.at(1).toString();
}

passes::IntraOpOptions options(std::int64_t batch) {
  passes::IntraOpOptions o;
  o.batch = batch;
  o.solver.timeBudgetSeconds = 5;
  return o;
}

}  // namespace

TEST_CASE("MLP with batch >> hidden is data parallel; objective = two weight all-reduces") {
  ir::Graph g = test::buildMlp(256);
  ir::LogicalMesh mesh = test::nvlinkMesh(1, 4);
  auto r = passes::solveIntraOp(g, mesh, test::v100(), options(65536));
  CHECK(r.optimal);
  CHECK(weightSpec(g, r, "fc1") == "RR");
  CHECK(weightSpec(g, r, "fc2") == "RR");
  CHECK(decision(g, r, ir::OpKind::MatMul, "fc1").inputs[0].toString() == "S1R");
  CHECK(decision(g, r, ir::OpKind::MatMul, "fc2").outputs[0].toString() == "S1R");
  double weightAllReduce =
      collectiveCost(Collective::kAllReduce, 256.0 * 256 * 4, ir::MeshAxes::k1, mesh);
  CHECK(r.objective == Approx(2 * weightAllReduce).epsilon(1e-9));
  CHECK(r.communication == Approx(2 * weightAllReduce).epsilon(1e-9));
  CHECK(r.resharding == 0);
  CHECK(r.computePenalty == Approx(0).margin(1e-15));
}

TEST_CASE("MLP with hidden >> batch is Megatron's column-then-row split") {
  ir::Graph g = test::buildMlp(8192);
  ir::LogicalMesh mesh = test::nvlinkMesh(1, 4);
  auto r = passes::solveIntraOp(g, mesh, test::v100(), options(8));
  CHECK(r.optimal);
  CHECK(weightSpec(g, r, "fc1") == "RS1");  // column parallel
  CHECK(weightSpec(g, r, "fc2") == "S1R");  // row parallel
  const auto& fc1 = decision(g, r, ir::OpKind::MatMul, "fc1");
  const auto& fc2 = decision(g, r, ir::OpKind::MatMul, "fc2");
  CHECK(fc1.outputs[0].toString() == "RS1");
  CHECK(fc2.inputs[0].toString() == "RS1");
  CHECK(fc2.outputs[0].toString() == "RR");
  // One all-reduce of the activation [8, 8192]; fc1's input is data (no gradient).
  double activationAllReduce =
      collectiveCost(Collective::kAllReduce, 8.0 * 8192 * 4, ir::MeshAxes::k1, mesh);
  CHECK(fc1.communication == 0);
  CHECK(fc2.communication == Approx(activationAllReduce));
  CHECK(r.communication + r.resharding ==
        Approx(activationAllReduce).epsilon(0.01).margin(20e-6));
  CHECK(r.objective >= activationAllReduce);
  CHECK(r.objective < 1.5 * activationAllReduce);
}

TEST_CASE("a transformer block on (1, 4) gets the Megatron pattern") {
  ir::Graph g = test::buildTransformer(1, 1024, 16, 128);
  auto r = passes::solveIntraOp(g, test::nvlinkMesh(1, 4), test::v100(), options(8));
  CHECK(r.optimal);
  INFO("qkv " << decision(g, r, ir::OpKind::MatMul, "block0.attn", 0).strategy);
  INFO("proj " << decision(g, r, ir::OpKind::MatMul, "block0.attn", 3).strategy);
  INFO("fc1 " << decision(g, r, ir::OpKind::MatMul, "block0.mlp", 0).strategy);
  INFO("fc2 " << decision(g, r, ir::OpKind::MatMul, "block0.mlp", 1).strategy);
  CHECK(weightSpec(g, r, "block0.attn", 0) == "RS1");  // QKV column-split
  CHECK(weightSpec(g, r, "block0.attn", 3) == "S1R");  // attention output row-split
  CHECK(weightSpec(g, r, "block0.mlp", 0) == "RS1");   // fc1 column-split
  CHECK(weightSpec(g, r, "block0.mlp", 1) == "S1R");   // fc2 row-split
  // Attention runs on the local heads: the score matmul splits the heads loop.
  CHECK(decision(g, r, ir::OpKind::MatMul, "block0.attn", 1).outputs[0].toString() == "RS1RR");
}

TEST_CASE("repeated layers are solved once and every copy takes the same strategies") {
  ir::Graph g = test::buildTransformer(3, 256, 8, 64);
  auto merged = passes::solveIntraOp(g, test::nvlinkMesh(2, 2), test::v100(), options(4));
  auto opts = options(4);
  opts.mergeRepeatedLayers = false;
  auto full = passes::solveIntraOp(g, test::nvlinkMesh(2, 2), test::v100(), opts);
  // block0 reads the graph's input (no gradient), so only block2 copies block1.
  CHECK(merged.repeatedLayers == 1);
  CHECK(merged.problemNodes < full.problemNodes);
  // Tying copies can only restrict the problem; on identical layers it loses nothing here.
  CHECK(merged.objective >= full.objective * (1 - 1e-9));
  CHECK(merged.objective == Approx(full.objective).epsilon(1e-6));
  for (const auto& op : merged.ops) {
    if (op.representative == op.op) continue;
    CHECK(op.strategy == merged.ops[op.representative].strategy);
  }
}

TEST_CASE("the pass is deterministic and explains every choice") {
  ir::Graph g = test::buildTransformer(2, 512, 8, 64);
  auto a = passes::solveIntraOp(g, test::nvlinkMesh(2, 2), test::v100(), options(8));
  auto b = passes::solveIntraOp(g, test::nvlinkMesh(2, 2), test::v100(), options(8));
  REQUIRE(a.ops.size() == b.ops.size());
  CHECK(a.objective == b.objective);
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    CHECK(a.ops[i].strategy == b.ops[i].strategy);
    REQUIRE(!a.ops[i].alternatives.empty());
    // The chosen strategy's objective is the least of its alternatives.
    for (const auto& alt : a.ops[i].alternatives) CHECK(alt.objective >= a.objective * (1 - 1e-9));
    CHECK(a.ops[i].alternatives[a.ops[i].chosen].objective == Approx(a.objective));
  }
}

TEST_CASE("a memory budget trades communication for memory (ZeRO-like sharding)") {
  ir::Graph g = test::buildMlp(1024);
  ir::LogicalMesh mesh = test::nvlinkMesh(1, 4);
  auto free = passes::solveIntraOp(g, mesh, test::v100(), options(16384));
  CHECK(weightSpec(g, free, "fc1") == "RR");
  double weights = 2.0 * 1024 * 1024 * 4;
  // Data parallel holds weight, gradient and two Adam moments of both weights.
  CHECK(free.memory.weights == Approx(weights));
  CHECK(free.memory.optimizerState == Approx(2 * weights));
  auto opts = options(16384);
  opts.shardOptimizerState = true;
  auto zero = passes::solveIntraOp(g, mesh, test::v100(), opts);
  CHECK(zero.memory.gradients == Approx(weights / 4));
  CHECK(zero.memory.optimizerState == Approx(2 * weights / 4));
  // The same ring traffic: reduce-scatter + all-gather = all-reduce.
  CHECK(zero.objective == Approx(free.objective));

  // Half the parameter state must go: parameters are then stored sharded and
  // gathered for use (ZeRO stage 3 / FSDP), which costs all-gathers.
  auto bounded = options(16384);
  bounded.memoryBudget = free.memory.total() - 2 * weights;
  auto tight = passes::solveIntraOp(g, mesh, test::v100(), bounded);
  CHECK(tight.memory.total() <= *bounded.memoryBudget * (1 + 1e-9));
  CHECK(tight.objective > free.objective);
}

TEST_CASE("backward and update ops are refused") {
  test::GraphBuilder b;
  auto x = b.input("x", "f32[batch, 4]");
  auto y = b.op(ir::OpKind::Relu, {x});
  b.op(ir::OpKind::ReluGrad, {x, y});
  CHECK_THROWS_AS(passes::solveIntraOp(b.graph, test::nvlinkMesh(1, 2), test::v100(), options(2)),
                  passes::IntraOpError);
}
