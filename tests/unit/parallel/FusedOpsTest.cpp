// runtime/FusedOps.h and runtime/cpu/FusedKernels.h: which runs of a graph's
// ops a backend may launch as one kernel, which of their values must still
// be produced, and the fused computation against the unfused chain of cpu
// kernels, bit for bit (f32, f16, bf16).
#include <random>

#include "ParallelModels.h"
#include "runtime/FusedOps.h"
#include "runtime/cpu/FusedKernels.h"
#include "runtime/cpu/Kernels.h"

using namespace meshflow;
using namespace meshflow::parallel_test;
using runtime::ChainStep;
using runtime::FusedGroup;
using runtime::FusedPattern;

namespace {

std::vector<ir::OpId> allOps(const ir::Graph& graph) {
  std::vector<ir::OpId> ops(graph.ops().size());
  for (ir::OpId id = 0; id < ops.size(); ++id) ops[id] = id;
  return ops;
}

std::vector<FusedGroup> groupsOf(const ir::Graph& graph) {
  const std::vector<ir::OpId> ops = allOps(graph);
  return runtime::findFusedGroups(graph, ops, runtime::ValueReaders(graph));
}

std::vector<FusedGroup> only(const std::vector<FusedGroup>& groups, FusedPattern pattern) {
  std::vector<FusedGroup> picked;
  for (const FusedGroup& g : groups)
    if (g.pattern == pattern) picked.push_back(g);
  return picked;
}

// The kinds of ops first..first+count, for messages.
std::string kindsOf(const ir::Graph& graph, const FusedGroup& g) {
  std::string text;
  for (std::size_t p = g.first; p < g.first + g.count; ++p)
    text += std::string(ir::opName(graph.op(p).kind)) + " ";
  return text;
}

ir::Op opOf(ir::OpKind kind, std::vector<ir::ValueId> inputs = {}) {
  ir::Op op;
  op.kind = kind;
  op.inputs = std::move(inputs);
  return op;
}

const char* kGpt = "tiny_gpt(seq = 8, layers = 2, hidden = 16, heads = 4)";

}  // namespace

TEST_CASE("a GPT's training graph has its attention softmax, their backwards and bias + GeLU fused",
          "[fusion]") {
  ir::Graph forward = traceModel("", kGpt);
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  const ir::Graph& graph = training.graph;
  const auto groups = groupsOf(graph);
  const auto softmax = only(groups, FusedPattern::kSoftmax);
  const auto grads = only(groups, FusedPattern::kSoftmaxGrad);
  const auto gelus = only(groups, FusedPattern::kBiasGelu);
  REQUIRE(softmax.size() == 2);  // one per layer
  REQUIRE(grads.size() == 2);
  REQUIRE(gelus.size() == 2);
  // The attention's and the MLP's output projections: bias add → residual add.
  const auto chains = only(groups, FusedPattern::kElementwise);
  REQUIRE(chains.size() == 4);
  for (const FusedGroup& g : chains) {
    INFO(kindsOf(graph, g));
    CHECK(g.count == 2);
    REQUIRE(g.steps.size() == 2);
    CHECK(g.steps[0].kind == ir::OpKind::Add);
    CHECK(g.steps[1].kind == ir::OpKind::Add);
    CHECK(g.steps[1].chainOnRight);  // x + (y + bias)
    CHECK(g.inputs.size() == 3);
  }
  for (const FusedGroup& g : softmax) {
    INFO(kindsOf(graph, g));
    CHECK(g.count == 3);  // scale, causal_mask, softmax
    CHECK(g.causal);
    CHECK(g.scale == Approx(0.5));  // 1 / sqrt(16 / 4)
    CHECK(graph.op(static_cast<ir::OpId>(g.first)).kind == ir::OpKind::Scale);
    CHECK(g.live == std::vector<bool>{true});
  }
  for (const FusedGroup& g : grads) {
    INFO(kindsOf(graph, g));
    CHECK(g.count == 3);  // softmax_grad, causal_mask_grad, scale
    CHECK(g.causal);
    CHECK(g.scale == Approx(0.5));
    // The backward reads the forward's softmax output: it is a group output there.
    CHECK(std::count_if(softmax.begin(), softmax.end(),
                        [&](const FusedGroup& f) { return f.outputs[0] == g.inputs[0]; }) == 1);
  }
  for (const FusedGroup& g : gelus) {
    INFO(kindsOf(graph, g));
    CHECK(g.count == 2);
    CHECK(g.live == std::vector<bool>{true, true});  // gelu_grad reads the pre-activation
    CHECK(graph.value(g.inputs[1]).type.rank() == 1);
  }
  // Forward only (evaluation): nothing reads the pre-activation but the GeLU.
  const auto forwardGelus = only(groupsOf(forward), FusedPattern::kBiasGelu);
  REQUIRE(forwardGelus.size() == 2);
  for (const FusedGroup& g : forwardGelus) CHECK(g.live == std::vector<bool>{false, true});
}

namespace {

// x = input f32[4, 4] → ops of `kinds` in a chain (each reading the last
// one's output), the last one's output the graph's.
struct HandChain {
  explicit HandChain(const std::vector<ir::OpKind>& kinds) {
    const ir::TensorType type{ir::DType::F32, {ir::Dim::constant(4), ir::Dim::constant(4)}};
    ir::Op in = opOf(ir::OpKind::Input);
    in.attrs["name"] = std::string("x");
    ir::ValueId last = graph.op(graph.addOp(in, {type})).outputs[0];
    for (ir::OpKind kind : kinds) {
      ir::Op op = opOf(kind, {last});
      if (kind == ir::OpKind::Scale) op.attrs["factor"] = 0.25;
      if (kind == ir::OpKind::SoftmaxGrad) op.inputs.push_back(last);
      last = graph.op(graph.addOp(op, {type})).outputs[0];
    }
    graph.outputs = {last};
  }
  // Another op reading op `id`'s output.
  void readAlso(ir::OpId id) {
    const ir::ValueId v = graph.op(id).outputs[0];
    graph.addOp(opOf(ir::OpKind::Neg, {v}), {graph.value(v).type});
  }
  ir::Graph graph;
};

}  // namespace

TEST_CASE("an intermediate something else reads cuts the chain there", "[fusion]") {
  using K = ir::OpKind;
  {
    HandChain c({K::Scale, K::CausalMask, K::Softmax});
    const auto groups = groupsOf(c.graph);
    REQUIRE(groups.size() == 1);
    CHECK(groups[0].first == 1);
    CHECK(groups[0].count == 3);
    CHECK(groups[0].scale == 0.25);
  }
  {
    HandChain c({K::Scale, K::CausalMask, K::Softmax});
    c.readAlso(1);  // the scaled scores: only mask → softmax fuses
    const auto groups = groupsOf(c.graph);
    REQUIRE(groups.size() == 1);
    CHECK(groups[0].first == 2);
    CHECK(groups[0].count == 2);
    CHECK(groups[0].scale == 1.0);
    CHECK(groups[0].causal);
  }
  {
    HandChain c({K::Scale, K::CausalMask, K::Softmax});
    c.readAlso(2);  // the masked scores: nothing fuses
    CHECK(groupsOf(c.graph).empty());
  }
  {
    HandChain c({K::Scale, K::Softmax});  // no mask
    const auto groups = groupsOf(c.graph);
    REQUIRE(groups.size() == 1);
    CHECK_FALSE(groups[0].causal);
  }
  {
    HandChain c({K::SoftmaxGrad, K::CausalMaskGrad, K::Scale});
    c.graph.outputs.push_back(c.graph.op(2).outputs[0]);  // the masked gradient leaves the graph
    const auto groups = groupsOf(c.graph);
    REQUIRE(groups.size() == 1);
    CHECK(groups[0].pattern == FusedPattern::kSoftmaxGrad);
    CHECK(groups[0].count == 2);  // softmax_grad → causal_mask_grad
    CHECK(groups[0].scale == 1.0);
  }
  CHECK(groupsOf(HandChain({K::Softmax}).graph).empty());  // one op is no group
  {
    HandChain c({K::Scale, K::Neg, K::Softmax});  // an element-wise chain, not a softmax
    const auto groups = groupsOf(c.graph);
    REQUIRE(groups.size() == 1);
    CHECK(groups[0].pattern == FusedPattern::kElementwise);
    CHECK(groups[0].count == 2);
  }
  {
    HandChain c({K::Relu, K::Tanh, K::Exp, K::Neg});
    c.readAlso(3);  // exp's result: the chain ends there, neg runs alone
    const auto groups = groupsOf(c.graph);
    REQUIRE(groups.size() == 1);
    CHECK(groups[0].first == 1);
    CHECK(groups[0].count == 3);
  }
}

namespace {

// Random elements (fresh per run, never all zero) of `dtype`.
runtime::Tensor randomTensor(ir::DType dtype, runtime::Shape shape, std::mt19937& rng,
                             float spread) {
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> values(static_cast<std::size_t>(runtime::shapeElements(shape)));
  for (float& v : values) v = normal(rng);
  return runtime::Tensor::fromF32(std::move(shape), std::move(values)).castTo(dtype);
}

// The chain of cpu kernels `ops`, each reading the last one's output
// (SoftmaxGrad: `y` and the last output).
runtime::Tensor unfused(const std::vector<ir::Op>& ops, std::vector<runtime::Tensor> inputs) {
  runtime::Tensor last = inputs[0];
  for (const ir::Op& op : ops) {
    std::vector<const runtime::Tensor*> in{&last};
    if (op.kind == ir::OpKind::SoftmaxGrad) in = {&inputs[0], &inputs[1]};
    if (op.kind == ir::OpKind::Add) in = {&inputs[0], &inputs[1]};
    runtime::Tensor y;
    std::vector<runtime::Tensor*> out{&y};
    runtime::cpu::runKernel(op, in, out, {});
    last = std::move(y);
  }
  return last;
}

runtime::Tensor fused(const FusedGroup& g, const std::vector<runtime::Tensor>& inputs,
                      runtime::Tensor* z = nullptr) {
  std::vector<const runtime::Tensor*> in;
  for (const auto& t : inputs) in.push_back(&t);
  REQUIRE(runtime::cpu::fusable(g, in));
  runtime::Tensor y;
  std::vector<runtime::Tensor*> out{&y};
  if (g.pattern == FusedPattern::kBiasGelu) out = {z, &y};
  runtime::cpu::runFused(g, in, out);
  return y;
}

ir::Op scaleOp(double factor) {
  ir::Op op = opOf(ir::OpKind::Scale);
  op.attrs["factor"] = factor;
  return op;
}

}  // namespace

TEST_CASE("the fused computations give the unfused chain's bits", "[fusion]") {
  using K = ir::OpKind;
  std::mt19937 rng(std::random_device{}());
  const double factor = 0.3535533905932738;  // 1 / sqrt(8)
  for (ir::DType dtype : {ir::DType::F32, ir::DType::F16, ir::DType::BF16}) {
    INFO(ir::dtypeName(dtype));
    const runtime::Shape scores{2, 3, 17, 17};
    for (bool causal : {true, false}) {
      INFO("causal " << causal);
      FusedGroup forward{
          FusedPattern::kSoftmax, 0, causal ? 3u : 2u, factor, causal, {0}, {1}, {true}, {}};
      std::vector<ir::Op> chain{scaleOp(factor)};
      if (causal) chain.push_back(opOf(K::CausalMask));
      chain.push_back(opOf(K::Softmax));
      const runtime::Tensor x = randomTensor(dtype, scores, rng, 4.0f);
      const runtime::Tensor y = fused(forward, {x});
      REQUIRE(y.dtype() == dtype);
      REQUIRE(y.bitEqual(unfused(chain, {x})));

      FusedGroup backward{
          FusedPattern::kSoftmaxGrad, 0, causal ? 3u : 2u, factor, causal, {0, 1}, {2}, {true}, {}};
      std::vector<ir::Op> grad{opOf(K::SoftmaxGrad)};
      if (causal) grad.push_back(opOf(K::CausalMaskGrad));
      grad.push_back(scaleOp(factor));
      const runtime::Tensor dy = randomTensor(dtype, scores, rng, 1.0f);
      const runtime::Tensor dx = fused(backward, {y, dy});
      REQUIRE(dx.bitEqual(unfused(grad, {y, dy})));
      // Arbitrary y (not a softmax's: nonzero above the diagonal) too.
      const runtime::Tensor anyY = randomTensor(dtype, scores, rng, 1.0f);
      REQUIRE(fused(backward, {anyY, dy}).bitEqual(unfused(grad, {anyY, dy})));
    }
    FusedGroup biasGelu{
        FusedPattern::kBiasGelu, 0, 2, 1.0, false, {0, 1}, {2, 3}, {true, true}, {}};
    const runtime::Tensor x = randomTensor(dtype, {3, 5, 24}, rng, 2.0f);
    const runtime::Tensor bias = randomTensor(dtype, {24}, rng, 1.0f);
    runtime::Tensor z;
    const runtime::Tensor y = fused(biasGelu, {x, bias}, &z);
    REQUIRE(z.bitEqual(unfused({opOf(K::Add)}, {x, bias})));
    REQUIRE(y.bitEqual(unfused({opOf(K::Add), opOf(K::Gelu)}, {x, bias})));
    REQUIRE(fused(biasGelu, {x, bias}, nullptr).bitEqual(y));  // z unread: not written
  }
}

namespace {

ChainStep stepOf(ir::OpKind kind, int other = -1, bool chainOnRight = false, double factor = 1.0) {
  ChainStep step;
  step.kind = kind;
  step.other = other;
  step.chainOnRight = chainOnRight;
  step.factor = factor;
  return step;
}

}  // namespace

TEST_CASE("an element-wise chain fused gives the unfused ops' bits", "[fusion]") {
  using K = ir::OpKind;
  std::mt19937 rng(std::random_device{}());
  for (ir::DType dtype : {ir::DType::F32, ir::DType::F16, ir::DType::BF16}) {
    INFO(ir::dtypeName(dtype));
    // bias[h] + x → 0.7·(·) → tanh → w − (·) → gelu → (·) / d, d broadcast over rows.
    const runtime::Tensor bias = randomTensor(dtype, {24}, rng, 1.0f),
                          x = randomTensor(dtype, {3, 5, 24}, rng, 2.0f),
                          w = randomTensor(dtype, {5, 24}, rng, 1.0f),
                          d = randomTensor(dtype, {3, 5, 1}, rng, 3.0f);
    FusedGroup chain;
    chain.pattern = FusedPattern::kElementwise;
    chain.count = 6;
    chain.inputs = {0, 1, 2, 3};
    chain.outputs = {4};
    chain.live = {true};
    chain.steps = {stepOf(K::Add, 1), stepOf(K::Scale, -1, false, 0.7),
                   stepOf(K::Tanh),   stepOf(K::Sub, 2, true),
                   stepOf(K::Gelu),   stepOf(K::Div, 3)};
    std::vector<const runtime::Tensor*> in{&bias, &x, &w, &d};
    REQUIRE(runtime::cpu::fusable(chain, in));
    runtime::Tensor y;
    std::vector<runtime::Tensor*> out{&y};
    runtime::cpu::runFused(chain, in, out);
    // The same ops one by one.
    const auto run = [](ir::Op op, std::vector<const runtime::Tensor*> operands) {
      runtime::Tensor r;
      std::vector<runtime::Tensor*> o{&r};
      runtime::cpu::runKernel(op, operands, o, {});
      return r;
    };
    runtime::Tensor v = run(opOf(K::Add), {&bias, &x});
    v = run(scaleOp(0.7), {&v});
    v = run(opOf(K::Tanh), {&v});
    v = run(opOf(K::Sub), {&w, &v});
    v = run(opOf(K::Gelu), {&v});
    v = run(opOf(K::Div), {&v, &d});
    REQUIRE(y.shape() == runtime::Shape{3, 5, 24});
    REQUIRE(y.bitEqual(v));
    // An operand that would grow the chain's value is not taken.
    runtime::Tensor wide = randomTensor(dtype, {2, 3, 5, 24}, rng, 1.0f);
    CHECK_FALSE(runtime::cpu::fusable(chain, {&bias, &x, &wide, &d}));
  }
}

TEST_CASE("operands a fused kernel does not take leave the ops to run one by one", "[fusion]") {
  FusedGroup causal{FusedPattern::kSoftmax, 0, 2, 1.0, true, {0}, {1}, {true}, {}};
  runtime::Tensor notSquare = runtime::Tensor::zeros({3, 4});
  runtime::Tensor square = runtime::Tensor::zeros({4, 4});
  CHECK_FALSE(runtime::cpu::fusable(causal, {&notSquare}));
  CHECK(runtime::cpu::fusable(causal, {&square}));
  FusedGroup gelu{FusedPattern::kBiasGelu, 0, 2, 1.0, false, {0, 1}, {2, 3}, {true, true}, {}};
  runtime::Tensor wrongBias = runtime::Tensor::zeros({3});
  runtime::Tensor bias = runtime::Tensor::zeros({4});
  runtime::Tensor halfBias = bias.castTo(ir::DType::BF16);
  CHECK_FALSE(runtime::cpu::fusable(gelu, {&square, &wrongBias}));
  CHECK_FALSE(runtime::cpu::fusable(gelu, {&square, &halfBias}));  // mixed types
  CHECK(runtime::cpu::fusable(gelu, {&square, &bias}));
  runtime::Tensor ids = runtime::Tensor::fromI32({4}, {0, 1, 2, 3});
  CHECK_FALSE(runtime::cpu::fusable(causal, {&ids}));
}
