// The serial executor on hand-built graphs: a small MLP, forward and as a
// training graph with its backward and update ops.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "KernelTestSupport.h"
#include "runtime/reference/SerialExecutor.h"

using namespace kernel_test;
using meshflow::ir::Dim;
using meshflow::ir::DType;
using meshflow::ir::Graph;
using meshflow::ir::OpId;
using meshflow::ir::Phase;
using meshflow::ir::TensorType;
using meshflow::ir::ValueId;
using meshflow::runtime::ExecutionError;
using meshflow::runtime::ExecutorOptions;
using meshflow::runtime::initializeParameters;
using meshflow::runtime::SerialExecutor;
using meshflow::runtime::TensorMap;

namespace {

TensorType f32(std::vector<Dim> shape) { return {DType::F32, std::move(shape)}; }
Dim c(std::int64_t v) { return Dim::constant(v); }
Dim batch() { return Dim::batch(); }

// Builds graphs op by op; each call returns the op's first output.
struct Builder {
  Graph graph;
  std::string scope;
  Phase phase = Phase::Forward;

  OpId add(OpKind kind, std::vector<ValueId> inputs, std::vector<TensorType> types,
           Attributes attrs = {}) {
    meshflow::ir::Op op{kind, std::move(inputs), {}, std::move(attrs), scope, {}, phase, {}};
    return graph.addOp(std::move(op), types);
  }
  ValueId value(OpKind kind, std::vector<ValueId> inputs, TensorType type, Attributes attrs = {}) {
    return graph.op(add(kind, std::move(inputs), {std::move(type)}, std::move(attrs))).outputs[0];
  }
  ValueId leaf(OpKind kind, const std::string& name, TensorType type, Attributes attrs = {}) {
    attrs["name"] = name;
    ValueId v = value(kind, {}, std::move(type), std::move(attrs));
    graph.value(v).name = name;
    return v;
  }
  ValueId parameter(const std::string& name, TensorType type, const std::string& init) {
    Attributes attrs = {{"init", init}};
    if (init == "normal") attrs["std"] = 0.5;
    return leaf(OpKind::Parameter, name, std::move(type), attrs);
  }
};

enum class Optimizer { None, Sgd, Adam };

// x[batch, 4] → fc1 (8) → relu → fc2 (3) → cross_entropy against labels[batch];
// with an optimizer, also the backward ops, gradient clipping and the updates.
Graph mlp(Optimizer optimizer) {
  Builder b;
  ValueId x = b.leaf(OpKind::Input, "x", f32({batch(), c(4)}));
  ValueId labels = b.leaf(OpKind::Input, "labels", {DType::I32, {batch()}});
  b.scope = "fc1";
  ValueId w1 = b.parameter("fc1.w", f32({c(4), c(8)}), "normal");
  ValueId b1 = b.parameter("fc1.b", f32({c(8)}), "zeros");
  ValueId h = b.value(OpKind::MatMul, {x, w1}, f32({batch(), c(8)}));
  ValueId hb = b.value(OpKind::Add, {h, b1}, f32({batch(), c(8)}));
  b.scope = "";
  ValueId a = b.value(OpKind::Relu, {hb}, f32({batch(), c(8)}));
  b.scope = "fc2";
  ValueId w2 = b.parameter("fc2.w", f32({c(8), c(3)}), "normal");
  ValueId b2 = b.parameter("fc2.b", f32({c(3)}), "zeros");
  ValueId o = b.value(OpKind::MatMul, {a, w2}, f32({batch(), c(3)}));
  ValueId logits = b.value(OpKind::Add, {o, b2}, f32({batch(), c(3)}));
  b.scope = "";
  ValueId loss = b.value(OpKind::CrossEntropy, {logits, labels}, f32({}));
  b.graph.outputs = {loss};
  if (optimizer == Optimizer::None) return std::move(b.graph);

  b.phase = Phase::Backward;
  ValueId one = b.value(OpKind::Constant, {}, f32({}), {{"value", 1.0}});
  ValueId dlogits = b.value(OpKind::CrossEntropyGrad, {logits, labels, one}, f32({batch(), c(3)}));
  ValueId db2 = b.value(OpKind::ReduceToShape, {dlogits, b2}, f32({c(3)}));
  ValueId aT = b.value(OpKind::Transpose, {a}, f32({c(8), batch()}),
                       {{"perm", std::vector<std::int64_t>{1, 0}}});
  ValueId dw2 = b.value(OpKind::MatMul, {aT, dlogits}, f32({c(8), c(3)}));
  ValueId da = b.value(OpKind::MatMul, {dlogits, w2}, f32({batch(), c(8)}),
                       {{"transpose_b", std::int64_t{1}}});
  ValueId dhb = b.value(OpKind::ReluGrad, {hb, da}, f32({batch(), c(8)}));
  ValueId db1 = b.value(OpKind::ReduceToShape, {dhb, b1}, f32({c(8)}));
  ValueId xT = b.value(OpKind::Transpose, {x}, f32({c(4), batch()}),
                       {{"perm", std::vector<std::int64_t>{1, 0}}});
  ValueId dw1 = b.value(OpKind::MatMul, {xT, dhb}, f32({c(4), c(8)}));

  b.phase = Phase::Update;
  ValueId norm = b.value(OpKind::GlobalNorm, {dw1, db1, dw2, db2}, f32({}));
  ValueId scale = b.value(OpKind::ClipScale, {norm}, f32({}), {{"clip_norm", 5.0}});
  std::vector<std::pair<ValueId, ValueId>> params = {{w1, dw1}, {b1, db1}, {w2, dw2}, {b2, db2}};
  for (auto [w, g] : params) {
    const std::string& name = b.graph.value(w).name;
    TensorType type = b.graph.value(w).type;
    ValueId m = b.parameter(name + ".m", type, "zeros");
    if (optimizer == Optimizer::Sgd) {
      OpId id = b.add(OpKind::SgdUpdate, {w, g, scale, m}, {type, type},
                      {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.0}});
      for (ValueId out : b.graph.op(id).outputs) b.graph.outputs.push_back(out);
    } else {
      ValueId v = b.parameter(name + ".v", type, "zeros");
      OpId id = b.add(OpKind::AdamUpdate, {w, g, scale, m, v}, {type, type, type},
                      {{"lr", 0.05},
                       {"beta1", 0.9},
                       {"beta2", 0.999},
                       {"eps", 1e-8},
                       {"weight_decay", 0.01},
                       {"decoupled", std::int64_t{1}}});
      for (ValueId out : b.graph.op(id).outputs) b.graph.outputs.push_back(out);
    }
  }
  return std::move(b.graph);
}

// A learnable batch: the label is the index of the largest of three fixed
// projections of x.
TensorMap batchOf(std::int64_t size) {
  Tensor x = meshflow::runtime::randomNormal({size, 4}, 99);
  std::vector<std::int32_t> labels;
  for (std::int64_t i = 0; i < size; ++i) {
    const float* r = x.f32().data() + i * 4;
    float s[3] = {r[0] + r[1], r[2] - r[0], r[3] - r[1]};
    labels.push_back(static_cast<std::int32_t>(std::max_element(s, s + 3) - s));
  }
  TensorMap inputs;
  inputs.emplace("x", x);
  inputs.emplace("labels", Tensor::fromI32({size}, labels));
  return inputs;
}

std::vector<float> train(Optimizer optimizer, int steps) {
  Graph graph = mlp(optimizer);
  SerialExecutor executor(graph, ExecutorOptions{16});
  TensorMap state;
  initializeParameters(graph, 1234, state);
  TensorMap inputs = batchOf(16);
  std::vector<float> losses;
  for (int step = 1; step <= steps; ++step)
    losses.push_back(executor.run(inputs, state, step).at(0).item());
  return losses;
}

}  // namespace

TEST_CASE("the executor runs an MLP forward, bit-identically twice", "[executor]") {
  Graph graph = mlp(Optimizer::None);
  TensorMap state;
  initializeParameters(graph, 42, state);
  CHECK(state.size() == 4);
  TensorMap inputs = batchOf(8);
  SerialExecutor executor(graph, ExecutorOptions{8});
  auto first = executor.run(inputs, state);
  auto second = SerialExecutor(graph, ExecutorOptions{8}).run(inputs, state);
  REQUIRE(first.size() == 1);
  CHECK(first[0].shape().empty());
  CHECK(std::isfinite(first[0].item()));
  CHECK(first[0].bitEqual(second[0]));
  // The same computation by hand, kernel by kernel.
  Tensor h = run1(OpKind::Relu,
                  {run1(OpKind::Add, {run1(OpKind::MatMul, {inputs.at("x"), state.at("fc1.w")}),
                                      state.at("fc1.b")})});
  Tensor logits =
      run1(OpKind::Add, {run1(OpKind::MatMul, {h, state.at("fc2.w")}), state.at("fc2.b")});
  CHECK(run1(OpKind::CrossEntropy, {logits, inputs.at("labels")}).bitEqual(first[0]));
}

TEST_CASE("training graphs lower the loss and repeat bit for bit", "[executor]") {
  for (Optimizer optimizer : {Optimizer::Sgd, Optimizer::Adam}) {
    INFO((optimizer == Optimizer::Sgd ? "sgd" : "adamw"));
    auto losses = train(optimizer, 40);
    CHECK(losses.back() < 0.5f * losses.front());
    auto again = train(optimizer, 40);
    for (std::size_t i = 0; i < losses.size(); ++i)
      CHECK(std::memcmp(&losses[i], &again[i], sizeof(float)) == 0);
  }
}

TEST_CASE("the executor writes updated parameters and state back", "[executor]") {
  Graph graph = mlp(Optimizer::Adam);
  SerialExecutor executor(graph, ExecutorOptions{16});
  TensorMap state;
  initializeParameters(graph, 5, state);
  CHECK(state.size() == 12);  // 4 parameters, each with m and v
  Tensor w = state.at("fc1.w");
  auto outputs = executor.run(batchOf(16), state, 1);
  CHECK(outputs.size() == 13);  // the loss, then w', m', v' for each parameter
  CHECK_FALSE(state.at("fc1.w").bitEqual(w));
  CHECK(state.at("fc1.w").bitEqual(outputs[1]));
  CHECK(state.at("fc1.w.m").bitEqual(outputs[2]));
  CHECK(state.at("fc1.w.v").bitEqual(outputs[3]));
}

TEST_CASE("parameter init depends on the seed and the name only", "[executor]") {
  Builder one, two;
  one.parameter("a", f32({c(3), c(2)}), "normal");
  one.parameter("b", f32({c(2)}), "normal");
  two.parameter("b", f32({c(2)}), "normal");
  two.parameter("a", f32({c(3), c(2)}), "normal");
  two.parameter("ones", f32({c(2)}), "ones");
  TensorMap s1, s2, s3;
  initializeParameters(one.graph, 7, s1);
  initializeParameters(two.graph, 7, s2);
  initializeParameters(one.graph, 8, s3);
  CHECK(s1.at("a").bitEqual(s2.at("a")));
  CHECK(s1.at("b").bitEqual(s2.at("b")));
  CHECK_FALSE(s1.at("a").bitEqual(s3.at("a")));
  checkValues(s2.at("ones"), {1, 1});
  // Parameters already in the state are left alone.
  s1.at("a") = Tensor::zeros({3, 2});
  initializeParameters(one.graph, 7, s1);
  CHECK(s1.at("a").bitEqual(Tensor::zeros({3, 2})));
}

TEST_CASE("execution errors name the op, its kind and scope", "[executor][errors]") {
  Graph graph = mlp(Optimizer::None);
  TensorMap state;
  initializeParameters(graph, 1, state);
  SerialExecutor executor(graph, ExecutorOptions{4});

  SECTION("a missing input") {
    TensorMap inputs = batchOf(4);
    inputs.erase("labels");
    CHECK_THROWS_WITH(executor.run(inputs, state),
                      "op 1 `input` (top level): no tensor was given for input `labels`");
  }
  SECTION("an input of the wrong shape for the bound batch") {
    CHECK_THROWS_WITH(executor.run(batchOf(5), state),
                      "op 0 `input` (top level): input `x` is f32[5, 4] but the graph expects "
                      "f32[batch, 4] = f32[4, 4] at batch 4");
  }
  SECTION("an input of the wrong dtype") {
    TensorMap inputs = batchOf(4);
    inputs.at("labels") = Tensor::zeros({4});
    CHECK_THROWS_AS(executor.run(inputs, state), ExecutionError);
  }
  SECTION("a missing parameter") {
    state.erase("fc2.b");
    CHECK_THROWS_WITH(executor.run(batchOf(4), state),
                      "op 8 `parameter` in `fc2`: parameter `fc2.b` is not in the state "
                      "(initializeParameters)");
  }
  SECTION("a kernel error") {
    TensorMap inputs = batchOf(4);
    inputs.at("labels").i32()[2] = 7;
    try {
      executor.run(inputs, state);
      FAIL("no error");
    } catch (const ExecutionError& e) {
      CHECK(e.opIndex() == 11);
      CHECK(e.kind() == OpKind::CrossEntropy);
      CHECK(std::string(e.what()) ==
            "op 11 `cross_entropy` (top level): cross_entropy: label 7 is outside [0, 3)");
    }
  }
  SECTION("a non-finite loss") {
    state.at("fc2.b").f32()[0] = NAN;
    CHECK_THROWS_WITH(executor.run(batchOf(4), state),
                      "op 11 `cross_entropy` (top level): the loss is NaN");
  }
}

TEST_CASE("intermediates are freed after their last use", "[executor]") {
  // x → relu → relu → … : at most two 4 MB intermediates are alive at once.
  Builder b;
  ValueId v = b.leaf(OpKind::Input, "x", f32({batch(), c(1024)}));
  for (int i = 0; i < 10; ++i) v = b.value(OpKind::Relu, {v}, f32({batch(), c(1024)}));
  b.graph.outputs = {v};
  SerialExecutor executor(b.graph, ExecutorOptions{1024});
  TensorMap inputs;
  inputs.emplace("x", meshflow::runtime::randomNormal({1024, 1024}, 1));
  TensorMap state;
  auto out = executor.run(inputs, state);
  CHECK(out[0].shape() == Shape{1024, 1024});
  CHECK(executor.lastStats().peakIntermediateBytes == 2 * 1024 * 1024 * 4);
}
