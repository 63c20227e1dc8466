// Mixed-precision training graphs: a half parameter is the compute copy of an
// fp32 master weight, its gradient is widened before the update, and with
// loss scaling the loss's gradient is the scale and the update can skip.
#include <catch2/catch.hpp>

#include "ir/OpRules.h"
#include "passes/Autodiff.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/reference/SerialExecutor.h"
#include "tests/unit/autodiff/Checks.h"
#include "tests/unit/autodiff/Models.h"

namespace meshflow::autodiff_test {
namespace {

using ir::DType;
using ir::Phase;
using passes::OptimizerConfig;

TensorType typed(DType dtype, std::vector<Dim> shape) { return {dtype, std::move(shape)}; }

/// logits = x·w in `dtype`; loss = cross_entropy(logits, labels) (f32).
ir::Graph halfClassifier(DType dtype) {
  GraphBuilder g;
  ValueId x = g.input("x", typed(dtype, {kBatch, d(4)}));
  ValueId labels = g.input("labels", i32({kBatch}));
  g.scope = "fc";
  ValueId w = g.param("w", typed(dtype, {d(4), d(3)}));
  g.scope = "";
  ValueId logits = g.op(OpKind::MatMul, {x, w}, typed(dtype, {kBatch, d(3)}));
  g.finish(g.op(OpKind::CrossEntropy, {logits, labels}, f32({})));
  return g.graph;
}

const ir::Op& producer(const ir::Graph& g, ValueId v) { return g.op(g.value(v).producer); }

const ir::Op& onlyOp(const ir::Graph& g, OpKind kind) {
  const ir::Op* found = nullptr;
  for (const ir::Op& op : g.ops())
    if (op.kind == kind) {
      REQUIRE(found == nullptr);
      found = &op;
    }
  REQUIRE(found != nullptr);
  return *found;
}

}  // namespace

TEST_CASE("a half parameter trains through an fp32 master weight", "[autodiff][half]") {
  ir::Graph forward = halfClassifier(DType::BF16);
  auto t = passes::buildTrainingGraph(forward, OptimizerConfig::adam());
  const ir::Graph& g = t.graph;
  REQUIRE_NOTHROW(passes::verifyGraph(g));
  ir::Graph prefix = g;
  prefix.ops().resize(forward.ops().size());
  prefix.outputs = forward.outputs;
  CHECK(dump(prefix) ==
        dump(forward));  // forward ids unchanged: plans of the forward graph still apply

  const ValueId w = forward.parameters().at(0);
  const ir::Op& adam = onlyOp(g, OpKind::AdamUpdate);
  const ir::Op& master = producer(g, adam.inputs[0]);
  CHECK(g.value(adam.inputs[0]).name == "fc.w.master");
  CHECK(g.value(adam.inputs[0]).type.dtype == DType::F32);
  CHECK(master.phase == Phase::Update);
  CHECK(master.forwardOp == g.value(w).producer);
  CHECK(std::get<std::string>(master.attrs.at("init_name")) == "fc.w");
  // The gradient is made in f32 in the backward, never rounded to half: the
  // ops that compute it keep their outputs in f32 (no cast widens a rounded
  // one), so microbatches accumulate it in f32.
  const ir::Op& made = producer(g, adam.inputs[1]);
  CHECK(made.kind != OpKind::Cast);
  CHECK(made.phase == Phase::Backward);
  CHECK(g.value(adam.inputs[1]).type.dtype == DType::F32);
  int kept = 0;
  for (const ir::Op& op : g.ops()) kept += op.attrs.count(ir::kF32Outputs) ? 1 : 0;
  CHECK(kept > 0);
  for (std::size_t i : {3, 4}) CHECK(g.value(adam.inputs[i]).type.dtype == DType::F32);
  // The new half parameter is the new master rounded.
  REQUIRE(t.writeBacks.size() == 4);  // w (cast), master, m, v
  const ir::Op& round = producer(g, t.writeBacks[0].updated);
  CHECK(t.writeBacks[0].target == w);
  CHECK(round.kind == OpKind::Cast);
  CHECK(round.phase == Phase::Update);
  CHECK(round.forwardOp == g.value(w).producer);
  CHECK(round.inputs[0] == adam.outputs[0]);
  CHECK(g.value(round.outputs[0]).type.dtype == DType::BF16);
  CHECK(t.writeBacks[1].target == adam.inputs[0]);
}

TEST_CASE("the serial reference keeps the half parameter its master rounded", "[autodiff][half]") {
  ir::Graph forward = halfClassifier(DType::F16);
  auto t = passes::buildTrainingGraph(forward, OptimizerConfig::adam(0.05));
  runtime::TensorMap state;
  runtime::initializeParameters(t.graph, 3, state);
  CHECK(state.at("fc.w").dtype() == DType::F16);
  CHECK(state.at("fc.w").bitEqual(state.at("fc.w.master").castTo(DType::F16)));
  runtime::SerialExecutor executor(t.graph, {2, true});
  runtime::TensorMap batch = {{"x", runtime::randomNormal({2, 4}, 5).castTo(DType::F16)},
                              {"labels", runtime::Tensor::fromI32({2}, {0, 2})}};
  runtime::Tensor before = state.at("fc.w.master");
  executor.run(batch, state, 1);
  CHECK_FALSE(state.at("fc.w.master").bitEqual(before));
  CHECK(state.at("fc.w").bitEqual(state.at("fc.w.master").castTo(DType::F16)));
}

TEST_CASE("loss scaling seeds the backward with the scale and can skip the update",
          "[autodiff][half]") {
  ir::Graph forward = halfClassifier(DType::F16);
  OptimizerConfig optimizer = OptimizerConfig::adam();
  optimizer.lossScale = 1024;
  optimizer.lossScaleWindow = 3;
  auto t = passes::buildTrainingGraph(forward, optimizer);
  const ir::Graph& g = t.graph;
  REQUIRE_NOTHROW(passes::verifyGraph(g));
  const ir::Op& grad = onlyOp(g, OpKind::CrossEntropyGrad);
  CHECK(g.value(grad.inputs[2]).name == "loss_scale");
  CHECK(producer(g, grad.inputs[2]).forwardOp == g.value(forward.outputs[0]).producer);
  const ir::Op& clip = onlyOp(g, OpKind::ClipScale);
  CHECK(clip.inputs.size() == 2);
  CHECK(clip.inputs[1] == grad.inputs[2]);
  const ir::Op& scaler = onlyOp(g, OpKind::LossScaleUpdate);
  CHECK(scaler.inputs[2] == clip.outputs[0]);
  CHECK(std::get<std::int64_t>(scaler.attrs.at("window")) == 3);
  REQUIRE(t.writeBacks.size() >= 2);
  CHECK(g.value(t.writeBacks.back().target).name == "loss_scale.counts");
  CHECK(g.value(t.writeBacks[t.writeBacks.size() - 2].target).name == "loss_scale");

  // A scale so large the f16 gradient overflows: the step is skipped.
  optimizer.lossScale = 1e9;
  auto huge = passes::buildTrainingGraph(forward, optimizer);
  runtime::TensorMap state;
  runtime::initializeParameters(huge.graph, 1, state);
  CHECK(state.at("loss_scale").item() == 1e9f);
  runtime::TensorMap before = state;
  runtime::SerialExecutor executor(huge.graph, {2, true});
  runtime::TensorMap batch = {{"x", runtime::randomNormal({2, 4}, 5).castTo(DType::F16)},
                              {"labels", runtime::Tensor::fromI32({2}, {0, 2})}};
  executor.run(batch, state, 1);
  for (const char* name : {"fc.w", "fc.w.master", "fc.w.adam_m", "fc.w.adam_v"}) {
    INFO(name);
    REQUIRE(state.count(name) == 1);
    CHECK(state.at(name).bitEqual(before.at(name)));
  }
  CHECK(state.at("loss_scale").item() == 5e8f);
  CHECK(state.at("loss_scale.counts").f32()[1] == 1);
}

TEST_CASE("a skipped step does not advance Adam's t", "[autodiff][half]") {
  // Step 2 after one skipped step is the optimizer's first update: it must
  // equal step 1 of a run that skipped nothing (t = 1 in both), as PyTorch's
  // GradScaler skips optimizer.step().
  ir::Graph forward = halfClassifier(DType::F16);
  OptimizerConfig optimizer = OptimizerConfig::adam();
  optimizer.lossScale = 1;
  auto t = passes::buildTrainingGraph(forward, optimizer);
  runtime::TensorMap fresh;
  runtime::initializeParameters(t.graph, 1, fresh);
  runtime::TensorMap afterSkip = fresh;
  afterSkip.at("loss_scale.counts").f32()[1] = 1;  // one step skipped so far
  runtime::TensorMap batch = {{"x", runtime::randomNormal({2, 4}, 5).castTo(DType::F16)},
                              {"labels", runtime::Tensor::fromI32({2}, {0, 2})}};
  runtime::SerialExecutor executor(t.graph, {2, true});
  executor.run(batch, fresh, 1);
  executor.run(batch, afterSkip, 2);
  for (const char* name : {"fc.w", "fc.w.master", "fc.w.adam_m", "fc.w.adam_v"}) {
    INFO(name);
    CHECK(afterSkip.at(name).bitEqual(fresh.at(name)));
  }
  CHECK(runtime::cpu::optimizerStep(afterSkip, 3) == 2);
}

TEST_CASE("a bad loss scale is refused", "[autodiff][half]") {
  OptimizerConfig optimizer = OptimizerConfig::adam();
  optimizer.lossScale = 0.5;
  CHECK_THROWS_WITH(passes::buildTrainingGraph(halfClassifier(DType::F16), optimizer),
                    Catch::Contains("loss scale"));
}

}  // namespace meshflow::autodiff_test
