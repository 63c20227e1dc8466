// The stdlib GPT, traced from .mesh, against the published closed forms.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <map>

#include "interp/Tracing.h"
#include "ir/OpCost.h"
#include "meshflow/meshflow.h"

using namespace meshflow;

namespace {

ir::Graph traced(Interpreter& interpreter, const std::string& model) {
  auto status = interpreter.eval("import std.models\ntrace(" + model + ")", "test.mesh");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
  auto* graph = dynamic_cast<interp::GraphObject*>(status.value->object().get());
  REQUIRE(graph != nullptr);
  return graph->graph();
}

// Narayanan et al. 2021: F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h)) per step.
double megatronFlops(double B, double s, double l, double h, double V) {
  return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
}

}  // namespace

TEST_CASE("stdlib GPT FLOPs match the dense-GPT formula within 2% (Megatron Table 1)", "[models]") {
  struct Row {
    const char* billions;
    int heads, hidden, layers;
  };
  // A subset of the table keeps the test fast; every row behaves the same.
  const Row rows[] = {{"1.7", 24, 2304, 24}, {"7.5", 32, 4096, 36}, {"39.1", 64, 8192, 48},
                      {"1008.0", 160, 25600, 128}};
  for (const auto& row : rows) {
    Interpreter interpreter;
    const ir::Graph graph = traced(interpreter, fmt::format("megatron_gpt({})", row.billions));
    const std::int64_t batch = 8, seq = 2048, vocab = 51200;
    ir::OpCost cost = ir::graphCost(graph, batch);
    double expected = megatronFlops(batch, seq, row.layers, row.hidden, vocab);
    INFO(row.billions << "B: graph " << cost.flops + cost.backwardFlops << " vs formula " << expected);
    CHECK(std::abs(cost.flops + cost.backwardFlops - expected) / expected < 0.02);
    // Parameters: 12lh² + 13lh + (V + s)h + 2h for the final norm, + Vh for the untied head.
    double l = row.layers, h = row.hidden;
    double params = 12 * l * h * h + 13 * l * h + (vocab + seq) * h + 2 * h + vocab * h;
    CHECK(static_cast<double>(ir::parameterCount(graph)) == params);
  }
}

TEST_CASE("the stdlib models trace with the scopes of their layers", "[models]") {
  Interpreter interpreter;
  const ir::Graph graph = traced(interpreter, "gpt(layers = 2, hidden = 32, heads = 2, seq = 8, vocab = 20)");
  std::vector<std::string> names;
  for (ir::ValueId p : graph.parameters()) names.push_back(graph.value(p).name);
  CHECK(names.front() == "wte.table");
  CHECK(std::find(names.begin(), names.end(), "block1.mlp.fc1.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "block0.self_attention.qkv.bias") != names.end());
  CHECK(names.back() == "head.weight");
  Interpreter moeInterpreter;
  const ir::Graph moe = traced(moeInterpreter, "moe_gpt(layers = 2, hidden = 16, heads = 2, experts = 3, seq = 8, vocab = 20)");
  // The experts are one weight per layer with an expert dimension, run through
  // capacity-limited dispatch and combine.
  bool experts = false, dispatch = false, combine = false;
  for (ir::ValueId p : moe.parameters()) {
    const ir::ValueInfo& v = moe.value(p);
    if (v.name == "block1.moe.fc1.weight") experts = v.type.text() == "f32[3, 16, 64]";
  }
  for (const auto& op : moe.ops()) {
    dispatch |= op.kind == ir::OpKind::MoeDispatch && op.scope == "block1.moe";
    combine |= op.kind == ir::OpKind::MoeCombine && op.scope == "block1.moe";
  }
  CHECK(experts);
  CHECK(dispatch);
  CHECK(combine);
}

TEST_CASE("gpt(dtype = f16) keeps every parameter in f16 and the loss in f32", "[models]") {
  Interpreter interpreter;
  const ir::Graph graph =
      traced(interpreter, "gpt(layers = 2, hidden = 32, heads = 2, seq = 8, vocab = 20, dtype = f16)");
  for (ir::ValueId p : graph.parameters()) {
    INFO(graph.value(p).name);
    CHECK(graph.value(p).type.dtype == ir::DType::F16);
  }
  CHECK(graph.value(graph.outputs.at(0)).type.dtype == ir::DType::F32);
  Interpreter fp32;
  const ir::Graph standard = traced(fp32, "gpt(layers = 2, hidden = 32, heads = 2, seq = 8, vocab = 20)");
  for (ir::ValueId p : standard.parameters()) CHECK(standard.value(p).type.dtype == ir::DType::F32);
}

TEST_CASE("llama3_405b has Llama 3's 405B parameters and GQA's smaller K/V", "[models][llama]") {
  Interpreter interpreter;
  const ir::Graph graph = traced(interpreter, "llama3_405b()");
  // Per block: Q and out h², K and V (h/heads·kv)·h each, SwiGLU 3·h·ffn, two RMSNorm
  // gains; plus the embedding, the final norm and the untied head.
  const double l = 126, h = 16384, ffn = 53248, vocab = 128256, kvWidth = 16384.0 / 128 * 8;
  const double block = 2 * h * h + 2 * kvWidth * h + 3 * h * ffn + 2 * h;
  const double params = l * block + 2 * vocab * h + h;
  CHECK(static_cast<double>(ir::parameterCount(graph)) == params);
  // Meta's 405B, within 1%.
  CHECK(std::abs(params / 405e9 - 1) < 0.01);
  std::map<std::string, std::vector<std::int64_t>> shapes;
  for (ir::ValueId p : graph.parameters()) {
    std::vector<std::int64_t> dims;
    for (const ir::Dim& d : graph.value(p).type.shape) dims.push_back(d.value);
    shapes[graph.value(p).name] = dims;
  }
  // Q, K and V in one projection, as Megatron fuses them: 16384 + 2·1024.
  CHECK(shapes.at("block0.self_attention.qkv.weight") == std::vector<std::int64_t>{16384, 18432});
  CHECK(shapes.at("block0.swiglu.gate.weight") == std::vector<std::int64_t>{16384, 53248});
  CHECK(shapes.at("block0.swiglu.down.weight") == std::vector<std::int64_t>{53248, 16384});
  CHECK(shapes.at("block0.attention_norm.gamma") == std::vector<std::int64_t>{16384});
  CHECK(shapes.count("block0.self_attention.qkv.bias") == 0);
  for (ir::ValueId p : graph.parameters()) CHECK(graph.value(p).type.dtype == ir::DType::BF16);
}

TEST_CASE("grouped-query attention costs multi-head attention's FLOPs less the smaller K/V", "[models][llama]") {
  // Same sizes, kv_heads = heads (multi-head) against kv_heads = 2: the score
  // and context matmuls are equal, the K/V projection is 2/8 the size.
  Interpreter interpreter;
  auto model = [](int kv) {
    return fmt::format("llama(layers = 1, hidden = 64, heads = 8, kv_heads = {}, ffn = 128, seq = 16, vocab = 32, dtype = f32)", kv);
  };
  const ir::Graph mha = traced(interpreter, model(8));
  const ir::Graph gqa = traced(interpreter, model(2));
  const std::int64_t batch = 4, seq = 16, h = 64;
  const double kvFlops = 3 * 2.0 * batch * seq * h * (2 * h);  // fwd + bwd of the K/V projection
  double saved = ir::graphCost(mha, batch).flops + ir::graphCost(mha, batch).backwardFlops -
                 ir::graphCost(gqa, batch).flops - ir::graphCost(gqa, batch).backwardFlops;
  CHECK(saved == Approx(kvFlops * (1 - 2.0 / 8)).epsilon(1e-6));
  CHECK(ir::parameterCount(mha) - ir::parameterCount(gqa) == 2 * h * h * 6 / 8);
}
