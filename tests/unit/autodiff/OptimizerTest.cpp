// The update phase: one update op per parameter with the optimizer's attrs,
// optimizer state as zero-initialised leaves, clipping, and the output order.
#include <catch2/catch.hpp>

#include "passes/Autodiff.h"
#include "tests/unit/autodiff/Checks.h"
#include "tests/unit/autodiff/Models.h"

namespace meshflow::autodiff_test {
namespace {

using ir::OpKind;
using ir::Phase;
using passes::buildTrainingGraph;
using passes::OptimizerConfig;

std::vector<const ir::Op*> updateOps(const ir::Graph& g) {
  std::vector<const ir::Op*> ops;
  for (const auto& op : g.ops())
    if (isUpdateStep(op.kind)) ops.push_back(&op);
  return ops;
}

double number(const ir::Op& op, const std::string& name) {
  return std::get<double>(op.attrs.at(name));
}

std::int64_t integer(const ir::Op& op, const std::string& name) {
  return std::get<std::int64_t>(op.attrs.at(name));
}

const ir::Op& producer(const ir::Graph& g, ir::ValueId v) { return g.op(g.value(v).producer); }

/// The state leaf read by `update` at input `index`: checks how it is declared.
void checkStateLeaf(const ir::Graph& g, const ir::Op& update, std::size_t index,
                    const std::string& role) {
  ir::ValueId param = update.inputs[0];
  const ir::Op& leaf = producer(g, update.inputs.at(index));
  std::string paramName = g.value(param).name;
  CHECK(leaf.kind == OpKind::Parameter);
  CHECK(leaf.phase == Phase::Update);
  CHECK(leaf.scope == producer(g, param).scope);
  CHECK(std::get<std::string>(leaf.attrs.at("name")) == paramName + "." + role);
  CHECK(std::get<std::string>(leaf.attrs.at("init")) == "zeros");
  CHECK(leaf.forwardOp == g.value(param).producer);
  CHECK(leaf.attrs.size() == 2);
  CHECK(g.value(update.inputs[index]).name == paramName + "." + role);
  CHECK(g.value(update.inputs[index]).type == g.value(param).type);
}

TEST_CASE("sgd: momentum buffer per parameter, coupled weight decay", "[autodiff]") {
  ir::Graph forward = mlp();
  auto t = buildTrainingGraph(forward, OptimizerConfig::sgd(0.05, 0.9, 1e-4));
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;
  auto updates = updateOps(g);
  REQUIRE(updates.size() == 4);
  for (const ir::Op* op : updates) {
    CHECK(op->kind == OpKind::SgdUpdate);
    REQUIRE(op->inputs.size() == 4);
    REQUIRE(op->outputs.size() == 2);
    CHECK(number(*op, "lr") == 0.05);
    CHECK(number(*op, "momentum") == 0.9);
    CHECK(number(*op, "weight_decay") == 1e-4);
    CHECK(op->attrs.size() == 3);
    checkStateLeaf(g, *op, 3, "momentum");
    // Without clipping the scale is the constant 1.
    const ir::Op& scale = producer(g, op->inputs[2]);
    CHECK(scale.kind == OpKind::Constant);
    CHECK(std::get<double>(scale.attrs.at("value")) == 1.0);
  }
  CHECK(count(g, OpKind::GlobalNorm, Phase::Update) == 0);
  // outputs: loss, w' for fc1.w fc1.b fc2.w fc2.b, then their momenta.
  REQUIRE(g.outputs.size() == 9);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(g.outputs[1 + i] == updates[i]->outputs[0]);
    CHECK(g.outputs[5 + i] == updates[i]->outputs[1]);
    CHECK(t.writeBacks[4 + i].target == updates[i]->inputs[3]);
  }
  CHECK(g.value(updates[0]->inputs[0]).name == "fc1.w");
  CHECK(g.value(updates[3]->inputs[0]).name == "fc2.b");
}

TEST_CASE("adam and adamw: m and v state, coupled or decoupled decay", "[autodiff]") {
  ir::Graph forward = attention();
  auto [config, decoupled] = GENERATE(std::make_pair(OptimizerConfig::adam(2e-3, 0.1), 0),
                                      std::make_pair(OptimizerConfig::adamw(3e-4, 0.05), 1));
  config.beta1 = 0.8;
  config.beta2 = 0.95;
  config.eps = 1e-6;
  auto t = buildTrainingGraph(forward, config);
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;
  auto updates = updateOps(g);
  std::size_t n = forward.parameters().size();
  REQUIRE(updates.size() == n);
  for (const ir::Op* op : updates) {
    CHECK(op->kind == OpKind::AdamUpdate);
    REQUIRE(op->inputs.size() == 5);
    REQUIRE(op->outputs.size() == 3);
    CHECK(number(*op, "lr") == config.lr);
    CHECK(number(*op, "beta1") == 0.8);
    CHECK(number(*op, "beta2") == 0.95);
    CHECK(number(*op, "eps") == 1e-6);
    CHECK(number(*op, "weight_decay") == config.weightDecay);
    CHECK(integer(*op, "decoupled") == decoupled);
    CHECK(integer(*op, "step") == 0);
    checkStateLeaf(g, *op, 3, "adam_m");
    checkStateLeaf(g, *op, 4, "adam_v");
  }
  // outputs: loss, every w', then m', v' per parameter.
  REQUIRE(g.outputs.size() == 1 + 3 * n);
  for (std::size_t i = 0; i < n; ++i) {
    CHECK(g.outputs[1 + i] == updates[i]->outputs[0]);
    CHECK(g.outputs[1 + n + 2 * i] == updates[i]->outputs[1]);
    CHECK(g.outputs[2 + n + 2 * i] == updates[i]->outputs[2]);
    CHECK(t.writeBacks[n + 2 * i].target == updates[i]->inputs[3]);
    CHECK(t.writeBacks[n + 2 * i + 1].target == updates[i]->inputs[4]);
  }
}

TEST_CASE("clipping: one global norm over the gradients in parameter order", "[autodiff]") {
  ir::Graph forward = embeddingModel();
  OptimizerConfig config = OptimizerConfig::adam();
  config.clipNorm = 0.5;
  auto t = buildTrainingGraph(forward, config);
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;
  REQUIRE(count(g, OpKind::GlobalNorm, Phase::Update) == 1);
  REQUIRE(count(g, OpKind::ClipScale, Phase::Update) == 1);
  auto updates = updateOps(g);
  const ir::Op& clip = producer(g, updates[0]->inputs[2]);
  CHECK(clip.kind == OpKind::ClipScale);
  CHECK(number(clip, "clip_norm") == 0.5);
  CHECK(g.value(clip.outputs[0]).type.text() == "f32[]");
  const ir::Op& norm = producer(g, clip.inputs[0]);
  CHECK(norm.kind == OpKind::GlobalNorm);
  REQUIRE(norm.inputs.size() == updates.size());
  for (std::size_t i = 0; i < updates.size(); ++i) {
    CHECK(norm.inputs[i] == updates[i]->inputs[1]);
    CHECK(updates[i]->inputs[2] == clip.outputs[0]);
  }
  // The clip ops come before every parameter's update and its state.
  CHECK(norm.phase == Phase::Update);
  CHECK(!norm.forwardOp);
}

TEST_CASE("a parameter the loss does not use is still updated, with a zero gradient",
          "[autodiff]") {
  ir::Graph forward = mlp();
  ir::Op unused;
  unused.kind = OpKind::Parameter;
  unused.attrs = {{"name", std::string("spare")}, {"init", std::string("normal")}, {"std", 0.02}};
  ir::ValueId spare = forward.op(forward.addOp(unused, {f32({d(3)})})).outputs[0];
  forward.value(spare).name = "spare";
  auto t = buildTrainingGraph(forward, OptimizerConfig::adamw());
  checkTrainingGraph(forward, t);
  const ir::Graph& g = t.graph;
  const ir::Op& update = *updateOps(g).back();
  CHECK(update.inputs[0] == spare);
  const ir::Op& zeros = producer(g, update.inputs[1]);
  CHECK(zeros.kind == OpKind::BroadcastTo);
  CHECK(zeros.phase == Phase::Backward);
  CHECK(std::get<double>(producer(g, zeros.inputs[0]).attrs.at("value")) == 0.0);
}

TEST_CASE("optimizer defaults match the .mesh builtins", "[autodiff]") {
  auto adam = OptimizerConfig::adam();
  CHECK((adam.kind == OptimizerConfig::Kind::Adam && adam.lr == 1e-3 && adam.beta1 == 0.9 &&
         adam.beta2 == 0.999 && adam.eps == 1e-8 && adam.weightDecay == 0 && adam.clipNorm == 0));
  auto adamw = OptimizerConfig::adamw();
  CHECK((adamw.kind == OptimizerConfig::Kind::AdamW && adamw.weightDecay == 0.01));
  auto sgd = OptimizerConfig::sgd();
  CHECK((sgd.kind == OptimizerConfig::Kind::Sgd && sgd.lr == 1e-2 && sgd.momentum == 0));
  for (auto kind :
       {OptimizerConfig::Kind::Sgd, OptimizerConfig::Kind::Adam, OptimizerConfig::Kind::AdamW})
    CHECK(passes::parseOptimizerKind(passes::optimizerKindName(kind)) == kind);
  CHECK(!passes::parseOptimizerKind("rmsprop"));
}

}  // namespace
}  // namespace meshflow::autodiff_test
