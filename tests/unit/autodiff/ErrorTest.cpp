// What autodiff refuses, and that the message says why.
#include <catch2/catch.hpp>

#include "passes/Autodiff.h"
#include "tests/unit/autodiff/Models.h"

namespace meshflow::autodiff_test {
namespace {

using Catch::Matchers::Contains;
using passes::AutodiffError;
using passes::buildTrainingGraph;
using passes::OptimizerConfig;

/// p[4] → relu → mean: a valid model to break.
GraphBuilder tiny() {
  GraphBuilder g;
  ValueId p = g.param("p", f32({d(4)}));
  ValueId r = g.op(OpKind::Relu, {p}, f32({d(4)}));
  g.finish(g.op(OpKind::Mean, {r}, f32({}), {{"axes", std::vector<std::int64_t>{0}}}));
  return g;
}

TEST_CASE("the loss must be one f32 scalar", "[autodiff]") {
  GraphBuilder g;
  ValueId x = g.input("x", f32({kBatch, d(4)}));
  ValueId w = g.param("w", f32({d(4), d(2)}));
  g.finish(g.op(OpKind::Sum, {g.op(OpKind::MatMul, {x, w}, f32({kBatch, d(2)}))}, f32({kBatch}),
                {{"axes", std::vector<std::int64_t>{1}}}));
  CHECK_THROWS_MATCHES(buildTrainingGraph(g.graph, OptimizerConfig::adam()), AutodiffError,
                       Catch::Matchers::Message(
                           "the loss must be an f32 scalar, f32[]; the forward graph's output is "
                           "f32[batch]"));

  GraphBuilder ints;
  ValueId ids = ints.input("ids", i32({}));
  ints.finish(ids);
  CHECK_THROWS_WITH(buildTrainingGraph(ints.graph, OptimizerConfig::adam()),
                    Contains("output is i32[]"));

  GraphBuilder two = tiny();
  two.graph.outputs.push_back(two.graph.outputs[0]);
  CHECK_THROWS_WITH(buildTrainingGraph(two.graph, OptimizerConfig::adam()),
                    Contains("exactly one output, its loss; it has 2"));
  two.graph.outputs.clear();
  CHECK_THROWS_WITH(buildTrainingGraph(two.graph, OptimizerConfig::adam()), Contains("it has 0"));
}

TEST_CASE("an op without a VJP rule is named", "[autodiff]") {
  GraphBuilder unknown = tiny();
  unknown.graph.ops()[1].kind = static_cast<ir::OpKind>(200);
  CHECK_THROWS_MATCHES(buildTrainingGraph(unknown.graph, OptimizerConfig::adam()), AutodiffError,
                       Catch::Matchers::Message("op #1 (kind 200) has no VJP rule: a forward graph "
                                                "holds only leaves and forward primitives"));

  // A backward or update op is not a forward primitive either.
  GraphBuilder backward = tiny();
  backward.graph.ops()[1].kind = ir::OpKind::ReluGrad;
  backward.graph.ops()[1].scope = "block2.mlp";
  CHECK_THROWS_WITH(buildTrainingGraph(backward.graph, OptimizerConfig::adam()),
                    Contains("op #1 (relu_grad in block2.mlp) has no VJP rule"));
}

TEST_CASE("integer parameters and malformed optimizers are refused", "[autodiff]") {
  GraphBuilder g = tiny();
  g.param("counts", i32({d(2)}));
  CHECK_THROWS_WITH(buildTrainingGraph(g.graph, OptimizerConfig::adam()),
                    Contains("parameter 'counts' is i32[2]"));

  ir::Graph ok = tiny().graph;
  OptimizerConfig bad = OptimizerConfig::adam();
  bad.lr = -1;
  CHECK_THROWS_WITH(buildTrainingGraph(ok, bad), Contains("lr must be a finite number >= 0"));
  bad = OptimizerConfig::adam();
  bad.beta2 = 1;
  CHECK_THROWS_WITH(buildTrainingGraph(ok, bad), Contains("beta1 and beta2 must lie in [0, 1)"));
  bad = OptimizerConfig::sgd();
  bad.clipNorm = -0.5;
  CHECK_THROWS_WITH(buildTrainingGraph(ok, bad), Contains("clip_norm"));
}

}  // namespace
}  // namespace meshflow::autodiff_test
