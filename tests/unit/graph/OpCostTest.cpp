// Per-op FLOPs and bytes, and the totals of a GPT against Megatron's formula.
#include <catch2/catch.hpp>

#include "GraphBuilder.h"
#include "ir/OpCost.h"

using meshflow::ir::OpCost;
using meshflow::ir::OpKind;
using meshflow::test::GptConfig;

namespace {

OpCost costOfLast(const meshflow::ir::Graph& g, std::int64_t batch) {
  return meshflow::ir::opCost(g, static_cast<meshflow::ir::OpId>(g.ops().size() - 1), batch);
}

}  // namespace

TEST_CASE("matmul costs 2·m·k·n and twice that backward", "[cost]") {
  meshflow::test::GraphBuilder b;
  auto x = b.input("x", "f32[batch, 64, 128]");
  auto w = b.parameter("w", "f32[128, 256]");
  b.op(OpKind::MatMul, {x, w});
  OpCost c = costOfLast(b.graph, 4);
  CHECK(c.flops == 2.0 * 4 * 64 * 128 * 256);
  CHECK(c.backwardFlops == 2 * c.flops);
  CHECK(c.bytesRead == 4.0 * (4 * 64 * 128 + 128 * 256));
  CHECK(c.bytesWritten == 4.0 * 4 * 64 * 256);
  CHECK(c.backwardBytesRead == c.bytesRead + 2 * c.bytesWritten);
  CHECK(c.backwardBytesWritten == c.bytesRead);

  auto wt = b.parameter("wt", "bf16[256, 128]");
  auto xb = b.input("xb", "bf16[batch, 128]");
  b.op(OpKind::MatMul, {xb, wt}, {{"transpose_b", 1}});
  OpCost t = costOfLast(b.graph, 2);
  CHECK(t.flops == 2.0 * 2 * 128 * 256);
  CHECK(t.bytesWritten == 2.0 * 2 * 256);  // bf16
}

TEST_CASE("a weight-gradient matmul contracts over the batch", "[cost]") {
  meshflow::test::GraphBuilder b;
  auto xt = b.input("xt", "f32[128, batch]");  // Aᵀ of a [batch, 128] activation
  auto dy = b.input("dy", "f32[batch, 256]");
  b.op(OpKind::MatMul, {xt, dy});
  CHECK(costOfLast(b.graph, 8).flops == 2.0 * 128 * 8 * 256);
}

TEST_CASE("elementwise, data movement, leaves and update costs", "[cost]") {
  meshflow::test::GraphBuilder b;
  auto x = b.input("x", "f32[batch, 8]");
  CHECK(costOfLast(b.graph, 3).flops == 0);
  CHECK(costOfLast(b.graph, 3).bytes() == 0);
  auto bias = b.parameter("bias", "f32[8]", "zeros");
  b.op(OpKind::Add, {x, bias});
  OpCost add = costOfLast(b.graph, 3);
  CHECK(add.flops == 24);
  CHECK(add.bytesRead == 4.0 * (24 + 8));
  CHECK(add.bytesWritten == 4.0 * 24);
  CHECK(add.backwardBytesRead == add.bytesRead + add.bytesWritten);
  CHECK(add.backwardBytesWritten == add.bytesRead);
  b.op(OpKind::Gelu, {x});
  CHECK(costOfLast(b.graph, 3).flops == 9 * 24);
  CHECK(costOfLast(b.graph, 3).backwardFlops == 16 * 24);
  b.op(OpKind::Reshape, {x}, {{"shape", std::vector<std::int64_t>{-1}}});
  CHECK(costOfLast(b.graph, 3).bytes() == 0);
  b.op(OpKind::Transpose, {x}, {{"perm", std::vector<std::int64_t>{1, 0}}});
  OpCost t = costOfLast(b.graph, 3);
  CHECK(t.flops == 0);
  CHECK(t.bytesRead == 96);
  CHECK(t.backwardBytesWritten == 96);
  auto dy = b.op(OpKind::ReluGrad, {x, x});
  OpCost grad = costOfLast(b.graph, 3);
  CHECK(grad.flops == 24);
  CHECK(grad.backwardFlops == 0);
  b.op(OpKind::ReduceToShape, {dy, bias});
  CHECK(costOfLast(b.graph, 3).flops == 24 - 8);
  auto scale = b.op(OpKind::Constant, {}, {{"value", 1.0}});
  auto m = b.parameter("m", "f32[8]", "zeros");
  b.ops(OpKind::SgdUpdate, {bias, bias, scale, m},
        {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.0}});
  OpCost sgd = costOfLast(b.graph, 3);
  CHECK(sgd.flops == 7 * 8);
  CHECK(sgd.bytesWritten == 2 * 4 * 8);
  CHECK(sgd.backwardFlops == 0);
}

TEST_CASE("moe dispatch and combine cost their routing and their slots", "[cost]") {
  meshflow::test::GraphBuilder b;
  auto x = b.input("x", "f32[batch, 8, 16]");
  auto gates = b.input("gates", "f32[batch, 8, 4]");
  meshflow::ir::Attributes capacity{{"capacity", 3}};
  auto slots = b.op(OpKind::MoeDispatch, {x, gates}, capacity);
  const double tokens = 2 * 8 * 16, gateCount = 2 * 8 * 4, slotCount = 4 * 2 * 3 * 16;  // batch 2
  OpCost d = costOfLast(b.graph, 2);
  CHECK(d.flops == 2 * gateCount);
  CHECK(d.bytesRead == 4 * (tokens + gateCount));
  CHECK(d.bytesWritten == 4 * slotCount);  // every slot, used or not
  CHECK(d.backwardFlops == slotCount);
  CHECK(d.backwardBytesWritten == 4 * tokens);  // the gates get no gradient
  b.op(OpKind::MoeCombine, {slots, gates}, capacity);
  OpCost c = costOfLast(b.graph, 2);
  CHECK(c.flops == 2 * slotCount + 2 * gateCount);
  CHECK(c.bytesWritten == 4 * tokens);
  CHECK(c.backwardFlops == 3 * slotCount);
  CHECK(c.backwardBytesWritten == 4 * (slotCount + gateCount));
}

TEST_CASE("embedding reads the rows it gathers and writes a dense table gradient", "[cost]") {
  meshflow::test::GraphBuilder b;
  auto table = b.parameter("wte", "f32[1000, 16]");
  auto ids = b.input("ids", "i32[batch, 8]");
  b.op(OpKind::Embedding, {table, ids});
  OpCost c = costOfLast(b.graph, 2);
  CHECK(c.flops == 0);
  CHECK(c.bytesRead == 4.0 * 16 + 4.0 * 16 * 16);
  CHECK(c.backwardBytesWritten == 4.0 * 1000 * 16);
  CHECK(meshflow::ir::parameterCount(b.graph) == 16000);
}

TEST_CASE("GPT parameters match the closed form", "[cost]") {
  for (GptConfig c : {GptConfig{1, 64, 4, 16, 100}, GptConfig{4, 128, 8, 64, 512},
                      GptConfig{24, 2304, 24, 2048, 51200}}) {
    auto g = meshflow::test::buildGpt(c);
    CHECK(meshflow::ir::parameterCount(g) == meshflow::test::gptParameterCount(c));
  }
}

TEST_CASE("GPT FLOPs are within 2% of Megatron's formula", "[cost]") {
  // Narayanan et al. 2021, Table 1 (../shared/reference/megatron_gpt_table1.csv):
  // layers, hidden, heads, global batch; V = 51200, s = 2048.
  struct Row {
    std::int64_t layers, hidden, heads, batch;
  };
  for (Row r : {Row{24, 2304, 24, 512}, Row{30, 3072, 32, 512}, Row{36, 4096, 32, 512},
                Row{40, 6144, 48, 1024}, Row{48, 8192, 64, 1536}, Row{60, 10240, 80, 1792},
                Row{80, 12288, 96, 2304}, Row{96, 16384, 128, 2160}, Row{105, 20480, 128, 2520},
                Row{128, 25600, 160, 3072}}) {
    GptConfig c{r.layers, r.hidden, r.heads, 2048, 51200};
    auto g = meshflow::test::buildGpt(c);
    OpCost total = meshflow::ir::graphCost(g, r.batch);
    double ours = total.flops + total.backwardFlops;
    double formula = meshflow::test::megatronFlops(c, r.batch);
    INFO("h = " << r.hidden << ", ours " << ours << ", formula " << formula);
    CHECK(std::abs(ours / formula - 1) < 0.02);
    // The formula counts matmuls only, so ours is a little above it.
    CHECK(ours >= formula);
  }
}

TEST_CASE("GPT matmul FLOPs are exactly the formula's", "[cost]") {
  GptConfig c{2, 64, 4, 16, 100};
  auto g = meshflow::test::buildGpt(c);
  double matmul = 0;
  for (meshflow::ir::OpId id = 0; id < g.ops().size(); ++id)
    if (g.op(id).kind == OpKind::MatMul) {
      OpCost cost = meshflow::ir::opCost(g, id, 3);
      matmul += cost.flops + cost.backwardFlops;
    }
  CHECK(matmul == Approx(meshflow::test::megatronFlops(c, 3)).epsilon(1e-12));
}
