// The verifier accepts well-formed graphs and names the op of each broken invariant.
#include <catch2/catch.hpp>

#include "GraphBuilder.h"
#include "ir/GraphText.h"
#include "passes/Verify.h"

using meshflow::ir::Graph;
using meshflow::ir::OpKind;
using meshflow::ir::parseGraph;
using meshflow::passes::VerifyError;
using meshflow::passes::verifyGraph;

namespace {

std::string verifyError(const Graph& graph) {
  try {
    verifyGraph(graph);
  } catch (const VerifyError& e) {
    return e.what();
  }
  return "no error";
}

std::string verifyText(const std::string& body, const std::string& outputs = "") {
  return verifyError(parseGraph("graph outputs(" + outputs + ")\n" + body));
}

const char* kX = "  %0 = input() {name = \"x\"} : f32[batch, 4] @fwd\n";

}  // namespace

TEST_CASE("built graphs verify", "[verify]") {
  CHECK(verifyError(meshflow::test::buildGpt({2, 64, 4, 16, 100})) == "no error");
  CHECK(verifyText(std::string(kX) +
                       "  %1 = relu(%0) : f32[batch, 4] @fwd\n"
                       "  %2 = relu_grad(%0, %1) : f32[batch, 4] @bwd scope=\"fc\" forward=#1\n",
                   "%2") == "no error");
}

TEST_CASE("the verifier checks recorded types against the rules", "[verify]") {
  CHECK(verifyText(std::string(kX) + "  %1 = relu(%0) : f32[4] @fwd scope=\"mlp\"\n") ==
        "op #1 (relu in \"mlp\"): output 0 is recorded as f32[4] but its rule gives f32[batch, 4]");
  CHECK(verifyText(std::string(kX) +
                   "  %1 = parameter() {init = \"zeros\", name = \"w\"} : f32[8, 4] @fwd\n"
                   "  %2 = matmul(%0, %1) : f32[batch, 4] @fwd scope=\"fc\"\n") ==
        "op #2 (matmul in \"fc\"): matmul: inner dimensions differ: f32[batch, 4] x f32[8, 4]");
  CHECK(verifyText(std::string(kX) + "  %1, %2 = relu(%0) : f32[batch, 4], f32[batch, 4] @fwd\n") ==
        "op #1 (relu): defines 2 values, its rule gives 1");
  CHECK(verifyText("  %0 = parameter() {init = \"zeros\", name = \"w\"} : f32[batch] @fwd\n") ==
        "op #0 (parameter): parameter: a parameter cannot depend on the batch size: f32[batch]");
  CHECK(verifyText(std::string(kX) + "  %1 = input(%0) {name = \"y\"} : f32[4] @fwd\n") ==
        "op #1 (input): a leaf takes no inputs, got 1");
}

TEST_CASE("the verifier checks SSA order and definitions", "[verify]") {
  CHECK(verifyText(std::string(kX) + "  %1 = relu(%2) : f32[batch, 4] @fwd scope=\"a\"\n"
                                     "  %2 = relu(%0) : f32[batch, 4] @fwd\n") ==
        "op #1 (relu in \"a\"): uses %2 before its definition (op #2)");
  CHECK(verifyText(std::string(kX), "%0") == "no error");

  meshflow::test::GraphBuilder b;
  auto x = b.input("x", "f32[4]");
  auto y = b.op(OpKind::Relu, {x});
  Graph twice = b.graph;
  twice.ops()[1].outputs = {x};  // relu claims the input's value
  CHECK(verifyError(twice) == "op #1 (relu): defines %0, already defined by op #0");

  Graph dangling = b.graph;
  dangling.ops()[1].inputs = {7};
  CHECK(verifyError(dangling) == "op #1 (relu): input %7 does not exist");

  Graph orphan = b.graph;
  orphan.ops().pop_back();  // the value %1 stays, produced by no op
  orphan.outputs = {y};
  CHECK(verifyError(orphan) == "graph output %1 is not defined by any op");
  orphan.outputs = {};
  orphan.ops().push_back(b.graph.op(1));
  orphan.ops().back().inputs = {y};
  orphan.ops().back().outputs = {};
  CHECK(verifyError(orphan) == "op #1 (relu): uses %1, which no op defines");

  Graph wrongProducer = b.graph;
  wrongProducer.value(y).producer = 0;
  CHECK(verifyError(wrongProducer) ==
        "op #1 (relu): defines %1, whose producer is recorded as op #0");

  Graph forward = b.graph;
  forward.ops()[1].forwardOp = 1;
  CHECK(verifyError(forward) == "op #1 (relu): forward op #1 is not an earlier op");

  try {
    verifyGraph(twice);
    FAIL("expected a VerifyError");
  } catch (const VerifyError& e) {
    CHECK(e.op() == 1u);
  }
}
