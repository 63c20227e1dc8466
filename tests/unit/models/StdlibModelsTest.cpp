// The stdlib GPT, traced from .mesh, against the published closed forms.
#include <catch2/catch.hpp>

#include <fmt/format.h>

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
