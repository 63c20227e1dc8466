// Layer clustering: chains, a GPT, user scopes and impossible requests.
#include <catch2/catch.hpp>
#include <set>

#include "passes/LayerClustering.h"
#include "tests/unit/graph/GraphBuilder.h"

namespace meshflow::passes {
namespace {

using ir::OpKind;
using test::GraphBuilder;

// x[8, 64] through `sizes.size()` linear layers (matmul by a 64x64 weight, so
// every op has the same FLOPs), each in scope `scopes[i]` when given.
ir::Graph chain(int ops, const std::vector<std::string>& scopes = {}) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", "f32[8, 64]");
  for (int i = 0; i < ops; ++i) {
    b.scope = scopes.empty() ? "" : scopes[i];
    ir::ValueId w = b.parameter("w" + std::to_string(i), "f32[64, 64]");
    x = b.op(OpKind::MatMul, {x, w});
  }
  b.graph.outputs = {x};
  return std::move(b.graph);
}

// The layer of the i-th matmul of a chain (ops are: input, then param, matmul pairs).
int layerOfMatmul(const LayerClustering& c, int i) { return c.layerOfOp.at(2 + 2 * i); }

TEST_CASE("a chain splits into balanced contiguous parts", "[plan][clustering]") {
  ir::Graph g = chain(12);
  LayerClustering c = clusterLayers(g, {.layers = 4, .useScopes = false});
  REQUIRE(c.layers.size() == 4);
  CHECK_FALSE(c.fromScopes);
  CHECK(c.tolerance == 0.5);
  for (int i = 0; i < 12; ++i) CHECK(layerOfMatmul(c, i) == i / 3);
  double perMatmul = c.layers[0].flops / 3;
  for (const LayerInfo& l : c.layers) CHECK(l.flops == Approx(3 * perMatmul));
  // Each boundary carries one f32[8, 64] activation; the first layer reads nothing.
  CHECK(c.layers[0].boundaryBytes == 0);
  for (int l = 1; l < 4; ++l) CHECK(c.layers[l].boundaryBytes == 8 * 64 * 4);
  CHECK(c.totalBoundaryBytes == 3 * 8 * 64 * 4);
  // The op ranges are contiguous: each layer starts where the previous ended.
  CHECK(c.layers[0].firstOp == 2);
  for (int l = 1; l < 4; ++l) CHECK(c.layers[l].firstOp == c.layers[l - 1].endOp + 1);
  CHECK(c.layers[3].endOp == g.ops().size());
}

TEST_CASE("leaves join the layer of their first consumer", "[plan][clustering]") {
  ir::Graph g = chain(4);
  LayerClustering c = clusterLayers(g, {.layers = 2});
  CHECK(c.layerOfOp[0] == 0);  // the input x
  CHECK(c.layerOfOp[1] == 0);  // w0
  CHECK(c.layerOfOp[5] == 1);  // w2, read by the third matmul
  CHECK(c.layerOfOp[6] == 1);
}

TEST_CASE("an uneven chain relaxes the tolerance and says so", "[plan][clustering]") {
  // Four equal matmuls into three layers: δ = 0 cannot hold, so δ is relaxed
  // (to 0.125, then doubled) until 2 + 1 + 1 fits: 2 is avg·1.5.
  ir::Graph g = chain(4);
  LayerClustering c = clusterLayers(g, {.layers = 3, .tolerance = 0, .useScopes = false});
  CHECK(c.tolerance == 0.5);
  CHECK(layerOfMatmul(c, 0) == 0);
  CHECK(layerOfMatmul(c, 1) == 0);  // earliest cuts win ties of bytes and balance
  CHECK(layerOfMatmul(c, 2) == 1);
  CHECK(layerOfMatmul(c, 3) == 2);
}

TEST_CASE("a GPT splits at block boundaries", "[plan][clustering]") {
  ir::Graph g = test::buildGpt({.layers = 4, .hidden = 64, .heads = 4, .seq = 16, .vocab = 128});
  for (bool useScopes : {false, true}) {
    INFO("useScopes " << useScopes);
    for (int layers : {2, 4}) {
      INFO("layers " << layers);
      LayerClustering c = clusterLayers(g, {.layers = layers, .batch = 2, .useScopes = useScopes});
      REQUIRE(int(c.layers.size()) == layers);
      CHECK(c.fromScopes == useScopes);
      int blocksPerLayer = 4 / layers;
      for (ir::OpId id = 0; id < g.ops().size(); ++id) {
        const ir::Op& op = g.op(id);
        if (op.kind == OpKind::Input || op.kind == OpKind::Parameter) continue;
        std::string top = op.scope.substr(0, op.scope.find('.'));
        int expected = top == "embed"  ? 0
                       : top == "head" ? layers - 1
                                       : std::stoi(top.substr(5)) / blocksPerLayer;
        INFO("op " << id << " " << ir::opName(op.kind) << " in " << op.scope);
        CHECK(c.layerOfOp[id] == expected);
      }
      // One activation f32[2, 16, 64] crosses each block boundary; the last layer
      // also reads the embedding table f32[128, 64] it shares with the first.
      for (int l = 1; l < layers; ++l) {
        double table = l == layers - 1 ? 128 * 64 * 4 : 0;
        CHECK(c.layers[l].boundaryBytes == 2 * 16 * 64 * 4 + table);
      }
    }
  }
}

TEST_CASE("user scopes are used when they are coarse enough", "[plan][clustering]") {
  // Six equal matmuls: scope a holds two, scope b four. On single ops the best
  // split is 3 + 3; cut at the scope boundary it is 2 + 4, within δ = 0.5.
  std::vector<std::string> scopes{"a.x", "a.y", "b.x", "b.y", "b.z", "b.w"};
  ir::Graph g = chain(6, scopes);
  LayerClustering byScope = clusterLayers(g, {.layers = 2});
  CHECK(byScope.fromScopes);
  for (int i = 0; i < 6; ++i) CHECK(layerOfMatmul(byScope, i) == (i < 2 ? 0 : 1));

  LayerClustering byOps = clusterLayers(g, {.layers = 2, .useScopes = false});
  CHECK_FALSE(byOps.fromScopes);
  for (int i = 0; i < 6; ++i) CHECK(layerOfMatmul(byOps, i) == (i < 3 ? 0 : 1));

  // With δ = 0.2 the scopes are too coarse (2 is not within 20% of 3): ops decide.
  LayerClustering tight = clusterLayers(g, {.layers = 2, .tolerance = 0.2});
  CHECK_FALSE(tight.fromScopes);
  CHECK(layerOfMatmul(tight, 2) == 0);
  // Three layers cannot come from two scope runs.
  CHECK_FALSE(clusterLayers(g, {.layers = 3}).fromScopes);
}

TEST_CASE("more layers than ops with FLOPs is an error", "[plan][clustering]") {
  ir::Graph g = chain(3);
  CHECK(clusterLayers(g, {.layers = 3}).layers.size() == 3);
  CHECK_THROWS_WITH(clusterLayers(g, {.layers = 4}),
                    "cannot split the graph into 4 layers: only 3 of its 3 compute ops carry "
                    "FLOPs, and every layer needs one");
  CHECK_THROWS_WITH(clusterLayers(g, {.layers = 0}), "layers: expected at least 1, got 0");
}

TEST_CASE("clustering is deterministic", "[plan][clustering]") {
  ir::Graph g = test::buildGpt({.layers = 3, .hidden = 32, .heads = 2, .seq = 8, .vocab = 64});
  LayerClustering a = clusterLayers(g, {.layers = 5, .useScopes = false});
  LayerClustering b = clusterLayers(g, {.layers = 5, .useScopes = false});
  CHECK(a.layerOfOp == b.layerOfOp);
  CHECK(a.totalBoundaryBytes == b.totalBoundaryBytes);
}

}  // namespace
}  // namespace meshflow::passes
