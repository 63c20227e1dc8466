// Hand-built forward graphs for the intra-op pass tests, and the meshes and
// device they run on.
#pragma once

#include <cmath>
#include <string>

#include "ir/Cluster.h"
#include "tests/unit/graph/GraphBuilder.h"

namespace meshflow::test {

/// A V100-like device (125 TFLOP/s, 900 GB/s, 16 GB).
inline ir::DeviceSpec v100() { return {"V100", 16e9, 125e12, 900e9}; }

/// A (1, 4) mesh on NVLink: α = 5 µs, 150 GB/s.
inline ir::LogicalMesh nvlinkMesh(std::int64_t a, std::int64_t b) {
  ir::LogicalMesh m;
  m.shape = {a, b};
  m.alpha = {5e-6, 5e-6};
  m.beta = {1 / 150e9, 1 / 150e9};
  return m;
}

/// x[batch, hidden] → matmul w1 → relu → matmul w2 → cross_entropy with labels.
/// No biases, so data parallelism synchronises exactly the two weights.
inline ir::Graph buildMlp(std::int64_t hidden) {
  using ir::OpKind;
  GraphBuilder b;
  std::string h = std::to_string(hidden);
  auto x = b.input("x", "f32[batch, " + h + "]");
  auto labels = b.input("labels", "i32[batch]");
  b.scope = "fc1";
  auto w1 = b.parameter("w1", "f32[" + h + ", " + h + "]");
  auto y = b.op(OpKind::Relu, {b.op(OpKind::MatMul, {x, w1})});
  b.scope = "fc2";
  auto w2 = b.parameter("w2", "f32[" + h + ", " + h + "]");
  auto logits = b.op(OpKind::MatMul, {y, w2});
  b.scope = "loss";
  b.graph.outputs = {b.op(OpKind::CrossEntropy, {logits, labels})};
  return std::move(b.graph);
}

/// `layers` pre-norm transformer blocks (scopes block0 …) on x[batch, seq, hidden],
/// built like GraphBuilder.h's GPT, ending in the mean of the last block's output.
inline ir::Graph buildTransformer(std::int64_t layers, std::int64_t hidden, std::int64_t heads,
                                  std::int64_t seq) {
  using ir::OpKind;
  GraphBuilder b;
  auto dims = [](std::int64_t v) { return std::to_string(v); };
  std::string h = dims(hidden);
  auto x = b.input("x", "f32[batch, " + dims(seq) + ", " + h + "]");
  for (std::int64_t layer = 0; layer < layers; ++layer)
    x = b.transformerBlock("block" + std::to_string(layer), x, hidden, heads);
  b.scope = "loss";
  b.graph.outputs = {
      b.op(OpKind::Mean, {x}, {{"axes", std::vector<std::int64_t>{0, 1, 2}}})};
  return std::move(b.graph);
}

}  // namespace meshflow::test
