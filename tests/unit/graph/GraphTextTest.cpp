// The graph text form: print → parse → print is the identity, and malformed
// text is a GraphParseError at the right line and column.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "GraphBuilder.h"
#include "ir/GraphText.h"

using meshflow::ir::GraphParseError;
using meshflow::ir::OpKind;
using meshflow::ir::parseGraph;
using meshflow::ir::printGraph;

namespace {

void checkRoundTrip(const std::string& text) {
  std::string printed = printGraph(parseGraph(text));
  CHECK(printed == text);
  CHECK(printGraph(parseGraph(printed)) == printed);
}

std::string parseError(const std::string& text) {
  try {
    parseGraph(text);
  } catch (const GraphParseError& e) {
    return e.what();
  }
  return "no error";
}

// A graph with every kind of field: multi-result ops, backward and update
// phases, every attribute type, locations, scopes with escapes and names.
const char* kTraining = R"(graph outputs(%8, %12, %13)
  %0 = input() {name = "x"} : f32[batch, 4] @fwd
  %1 = parameter() {init = "normal", name = "w", std = 0.02} : f32[4, 4] @fwd scope="fc" names=[""]
  %2 = matmul(%0, %1) : f32[batch, 4] @fwd scope="fc" loc="net.mesh":3:7
  %3, %4 = split(%2) {axis = 1, sizes = [2, 2]} : f32[batch, 2], f32[batch, 2] @fwd scope="fc" names=["left", ""]
  %5 = reshape(%3) {shape = [-1]} : f32[batch*2] @fwd
  %6 = constant() {value = -1.5e-09} : f32[] @fwd loc="":0:4
  %7 = scale(%4) {factor = 1.0} : f32[batch, 2] @fwd scope="odd \"scope\"\\\n\t\x01"
  %8 = mean(%7) {axes = [0, 1]} : f32[] @fwd
  %9 = broadcast_to(%8, %7) {axes = [0, 1]} : f32[batch, 2] @bwd forward=#7
  %10 = global_norm(%9) : f32[] @update
  %11 = clip_scale(%10) {clip_norm = 1.0} : f32[] @update
  %12, %13 = sgd_update(%1, %1, %11, %1) {lr = 0.1, momentum = 0.0, weight_decay = 1e+20} : f32[4, 4], f32[4, 4] @update scope="fc" forward=#1
  %14 = top_k_gate(%2) {k = 2} : bf16[batch*16, 4] @fwd
  %15 = input() {empty = [], inf = inf, nan = nan, neg = -7, ninf = -inf, s = ""} : i64[] @fwd
)";

}  // namespace

TEST_CASE("text round trip of a hand-written graph", "[text]") {
  checkRoundTrip(kTraining);
  auto g = parseGraph(kTraining);
  REQUIRE(g.ops().size() == 14);
  CHECK(g.outputs == std::vector<meshflow::ir::ValueId>{8, 12, 13});
  CHECK(g.op(3).outputs == std::vector<meshflow::ir::ValueId>{3, 4});
  CHECK(g.value(0).name == "x");
  CHECK(g.value(1).name == "");
  CHECK(g.value(3).name == "left");
  CHECK(g.op(2).location.file == "net.mesh");
  CHECK(g.op(2).location.line == 3);
  CHECK(g.op(2).location.column == 7);
  CHECK(g.op(6).scope == "odd \"scope\"\\\n\t\x01");
  CHECK(g.op(8).phase == meshflow::ir::Phase::Backward);
  CHECK(g.op(8).forwardOp == 7u);
  CHECK(std::get<double>(g.op(5).attrs.at("value")) == -1.5e-09);
  CHECK(std::get<double>(g.op(6).attrs.at("factor")) == 1.0);
  CHECK(std::get<std::int64_t>(g.op(13).attrs.at("neg")) == -7);
  CHECK(std::isnan(std::get<double>(g.op(13).attrs.at("nan"))));
  CHECK(std::get<double>(g.op(13).attrs.at("ninf")) == -std::numeric_limits<double>::infinity());
  CHECK(g.value(14).type.shape[0] == meshflow::ir::Dim::batch(16));
}

TEST_CASE("text round trip of built graphs", "[text]") {
  for (auto config : {meshflow::test::GptConfig{1, 64, 4, 16, 100},
                      meshflow::test::GptConfig{3, 96, 6, 32, 256}}) {
    auto gpt = meshflow::test::buildGpt(config);
    std::string text = printGraph(gpt);
    checkRoundTrip(text);
    auto parsed = parseGraph(text);
    REQUIRE(parsed.ops().size() == gpt.ops().size());
    REQUIRE(parsed.valueCount() == gpt.valueCount());
    for (std::size_t i = 0; i < gpt.valueCount(); ++i) {
      CHECK(parsed.value(i).type == gpt.value(i).type);
      CHECK(parsed.value(i).name == gpt.value(i).name);
    }
  }
  auto small = meshflow::test::buildGpt({1, 8, 2, 4, 10});
  std::string text = printGraph(small);
  CHECK(text.rfind("graph outputs(%", 0) == 0);
  CHECK(text.find("  %0 = input() {name = \"ids\"} : i32[batch, 4] @fwd\n") != std::string::npos);
  CHECK(text.find("= matmul(%") != std::string::npos);
  CHECK(text.find("{transpose_b = 1} : f32[batch, 2, 4, 4] @fwd scope=\"block0.attn\"\n") !=
        std::string::npos);
}

TEST_CASE("printing renumbers values in order of definition", "[text]") {
  meshflow::test::GraphBuilder b;
  auto x = b.input("x", "f32[4]");
  auto y = b.op(OpKind::Relu, {x});
  b.op(OpKind::Neg, {y});
  b.graph.outputs = {2};
  // Swap the last two ops: the printed numbers follow the new order, and the
  // use of %1 before its definition survives for the verifier to find.
  std::swap(b.graph.ops()[1], b.graph.ops()[2]);
  CHECK(printGraph(b.graph) ==
        "graph outputs(%1)\n"
        "  %0 = input() {name = \"x\"} : f32[4] @fwd\n"
        "  %1 = neg(%2) : f32[4] @fwd\n"
        "  %2 = relu(%0) : f32[4] @fwd\n");
}

TEST_CASE("text allows comments and free layout", "[text]") {
  auto g = parseGraph(
      "// a comment\n"
      "graph outputs ( %1 )  // trailing\n"
      "%0 = input() {name=\"x\"}:f32[batch,4]@fwd\n"
      "%1 =\n  relu(%0)\n  : f32[batch, 4] @fwd\n");
  CHECK(printGraph(g) ==
        "graph outputs(%1)\n"
        "  %0 = input() {name = \"x\"} : f32[batch, 4] @fwd\n"
        "  %1 = relu(%0) : f32[batch, 4] @fwd\n");
  CHECK(printGraph(parseGraph("graph outputs()\n")) == "graph outputs()\n");
}

TEST_CASE("malformed text reports line and column", "[text]") {
  CHECK(parseError("") == "1:1: expected 'graph', found end of input");
  CHECK(parseError("graph outputs(%0)\n") == "1:15: use of undefined value %0");
  CHECK(parseError("graph outputs()\n  %1 = input() : f32[] @fwd\n") ==
        "2:3: expected %0: values are numbered in order of definition");
  CHECK(parseError("graph outputs()\n  %0 = inptu() : f32[] @fwd\n") == "2:8: unknown op 'inptu'");
  CHECK(parseError("graph outputs()\n  %0 = input() : f33[] @fwd\n") ==
        "2:18: unknown dtype 'f33'");
  CHECK(parseError("graph outputs()\n  %0 = input() : f32[batch*] @fwd\n") ==
        "2:28: expected a batch multiple, found ']'");
  CHECK(parseError(
            "graph outputs()\n  %0 = input() : f32[] @fwd\n  %1 = relu(%0, %5) : f32[] @fwd\n") ==
        "3:17: use of undefined value %5");
  CHECK(parseError("graph outputs()\n  %0 = input() : f32[] @forward\n") ==
        "2:25: unknown phase 'forward'");
  CHECK(parseError("graph outputs()\n  %0 = input() : f32[] @fwd scope=\"x\n") ==
        "2:35: unterminated string");
  CHECK(parseError("graph outputs()\n  %0 = input() : f32[] @fwd color=\"red\"\n") ==
        "2:29: unknown op field 'color'");
  CHECK(parseError("graph outputs()\n  %0 = input() : f32[] @fwd scope=\"a\" scope=\"b\"\n") ==
        "2:39: duplicate 'scope'");
  CHECK(parseError("graph outputs()\n  %0 = input() {a = 1, a = 2} : f32[] @fwd\n") ==
        "2:24: duplicate attribute 'a'");
  CHECK(parseError("graph outputs()\n  %0 = input() {a = 1.} : f32[] @fwd\n") ==
        "2:21: malformed number '1.'");
  CHECK(parseError("graph outputs()\n  %0 = input() {a = 99999999999999999999} : f32[] @fwd\n") ==
        "2:21: number '99999999999999999999' out of range");
  CHECK(parseError("graph outputs()\n  %0, %1 = input() : f32[] @fwd\n") ==
        "2:3: 2 results but 1 types");
  CHECK(parseError("graph outputs()\n  %0 = input() : f32[] @fwd names=[\"a\", \"b\"]\n") ==
        "2:3: 1 results but 2 names");
  CHECK(parseError("graph outputs()\n  %0 = input() : f32[] @fwd forward=3\n") ==
        "2:37: expected an op reference #N, found '3'");
  CHECK(parseError("graph outputs()\n  %0 = input() : f32[] @fwd ?\n") ==
        "2:29: unexpected character '?'");
  CHECK(parseError("graph outputs()\n  %0 = input() {s = \"\\q\"} : f32[] @fwd\n") ==
        "2:21: unknown escape '\\q' in string");
}

TEST_CASE("every truncation or corruption of valid text parses or is a GraphParseError", "[text]") {
  std::string text = kTraining;
  for (std::size_t n = 0; n <= text.size(); ++n) {
    INFO("prefix of " << n << " characters");
    try {
      parseGraph(text.substr(0, n));
    } catch (const GraphParseError&) {
    }
    for (char c : {'%', '"', '-', '[', '\\', 'x'}) {
      std::string corrupt = text;
      if (n < corrupt.size()) corrupt[n] = c;
      try {
        parseGraph(corrupt);
      } catch (const GraphParseError&) {
      }
    }
  }
}
