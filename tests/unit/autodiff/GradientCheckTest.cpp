// End to end through the serial reference executor: the gradients the training
// graph computes match central finite differences of the forward graph's loss,
// and one SGD step written back by the executor moves each weight by -lr·g.
#include <catch2/catch.hpp>
#include <cmath>

#include "passes/Autodiff.h"
#include "runtime/reference/SerialExecutor.h"
#include "tests/unit/autodiff/Checks.h"
#include "tests/unit/autodiff/Models.h"

namespace meshflow::autodiff_test {
namespace {

using passes::buildTrainingGraph;
using passes::OptimizerConfig;
using runtime::Tensor;
using runtime::TensorMap;

constexpr std::int64_t kBatchSize = 2;

/// Every model parameter of `graph` drawn from N(0, stddev²), seeded per parameter.
TensorMap randomParameters(const ir::Graph& graph, std::uint64_t seed, float stddev) {
  TensorMap state;
  for (ir::ValueId v : graph.parameters())
    state[runtime::bindingName(graph, v)] = runtime::randomNormal(
        runtime::boundShape(graph.value(v).type, kBatchSize), seed + v, stddev);
  return state;
}

/// The training graph's gradient of every parameter (in parameter order): its
/// outputs are redirected from the updated weights to the gradients the update
/// ops read.
std::vector<Tensor> autodiffGradients(const ir::Graph& forward, const TensorMap& inputs,
                                      TensorMap state) {
  ir::Graph g = buildTrainingGraph(forward, OptimizerConfig::sgd()).graph;
  g.outputs.resize(1);
  for (const auto& op : g.ops())
    if (isUpdateStep(op.kind)) g.outputs.push_back(op.inputs[1]);
  runtime::initializeParameters(g, 0, state);  // the (zero) momentum buffers
  auto outputs = runtime::SerialExecutor(g, {kBatchSize}).run(inputs, state);
  return {outputs.begin() + 1, outputs.end()};
}

struct Mismatch {
  double worst = 0;  // the largest |fd - autodiff| / (atol + rtol·|autodiff|)
  std::string where;
};

/// Compares every element of every parameter gradient with (L(w+h) - L(w-h)) / 2h.
Mismatch compareWithFiniteDifferences(const ir::Graph& forward, const TensorMap& inputs,
                                      const TensorMap& parameters, double h) {
  auto gradients = autodiffGradients(forward, inputs, parameters);
  runtime::SerialExecutor executor(forward, {kBatchSize});
  TensorMap state = parameters;
  auto loss = [&] { return static_cast<double>(executor.run(inputs, state)[0].item()); };
  auto params = forward.parameters();
  REQUIRE(gradients.size() == params.size());
  Mismatch result;
  for (std::size_t p = 0; p < params.size(); ++p) {
    std::string name = runtime::bindingName(forward, params[p]);
    auto values = state.at(name).f32();
    auto grad = gradients[p].f32();
    REQUIRE(grad.size() == values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      float saved = values[i];
      values[i] = saved + static_cast<float>(h);
      double up = loss();
      values[i] = saved - static_cast<float>(h);
      double down = loss();
      values[i] = saved;
      double fd = (up - down) / (2 * h);
      double error = std::abs(fd - grad[i]) / (1e-4 + 2e-2 * std::abs(grad[i]));
      if (error > result.worst)
        result = {error,
                  fmt::format("{}[{}]: autodiff {} vs finite difference {}", name, i, grad[i], fd)};
    }
  }
  return result;
}

TEST_CASE("gradients match finite differences", "[autodiff][runtime]") {
  TensorMap inputs;
  inputs["x"] = runtime::randomNormal({kBatchSize, 4}, 11);
  inputs["y"] = runtime::randomNormal({kBatchSize, 2}, 12);
  // Relu has kinks: a small step keeps the finite differences off them.
  Mismatch m = compareWithFiniteDifferences(mlp(), inputs, randomParameters(mlp(), 1, 0.5f), 1e-3);
  INFO("mlp: " << m.where);
  CHECK(m.worst <= 1);

  inputs = {{"x", runtime::randomNormal({kBatchSize, 4, 8}, 21)}};
  m = compareWithFiniteDifferences(attention(), inputs, randomParameters(attention(), 2, 0.5f),
                                   1e-2);
  INFO("attention: " << m.where);
  CHECK(m.worst <= 1);

  inputs = {{"ids", runtime::randomInts({kBatchSize, 4}, 0, 16, 31)},
            {"labels", runtime::randomInts({kBatchSize, 4}, 0, 16, 32)}};
  m = compareWithFiniteDifferences(embeddingModel(), inputs,
                                   randomParameters(embeddingModel(), 3, 0.5f), 1e-2);
  INFO("embedding: " << m.where);
  CHECK(m.worst <= 1);

  inputs = {{"x", runtime::randomNormal({2, 3}, 41)}};
  m = compareWithFiniteDifferences(everyOp(), inputs, randomParameters(everyOp(), 4, 0.5f), 1e-2);
  INFO("every op: " << m.where);
  CHECK(m.worst <= 1);

  // The gates' gradient reaches the gate weights through the combine only; a
  // small step keeps the top-2 choice (and so the routing and drops) fixed.
  inputs = {{"x", runtime::randomNormal({kBatchSize, 4, 3}, 51)}};
  m = compareWithFiniteDifferences(moeModel(), inputs, randomParameters(moeModel(), 5, 0.5f), 1e-3);
  INFO("moe: " << m.where);
  CHECK(m.worst <= 1);
}

TEST_CASE("one sgd step writes w - lr·g and the momentum back", "[autodiff][runtime]") {
  ir::Graph forward = mlp();
  TensorMap inputs = {{"x", runtime::randomNormal({kBatchSize, 4}, 51)},
                      {"y", runtime::randomNormal({kBatchSize, 2}, 52)}};
  TensorMap before = randomParameters(forward, 5, 0.5f);
  auto gradients = autodiffGradients(forward, inputs, before);

  auto training = buildTrainingGraph(forward, OptimizerConfig::sgd(0.1));
  TensorMap state = before;
  runtime::initializeParameters(training.graph, 0, state);
  auto outputs = runtime::SerialExecutor(training.graph, {kBatchSize}).run(inputs, state);
  REQUIRE(outputs.size() == training.graph.outputs.size());
  auto params = forward.parameters();
  for (std::size_t p = 0; p < params.size(); ++p) {
    std::string name = runtime::bindingName(forward, params[p]);
    Tensor expected = before.at(name);
    for (std::size_t i = 0; i < expected.f32().size(); ++i)
      expected.f32()[i] -= 0.1f * gradients[p].f32()[i];
    INFO(name);
    CHECK(runtime::allClose(state.at(name), expected));
    CHECK(runtime::allClose(state.at(name + ".momentum"), gradients[p]));
    CHECK(outputs[1 + p].bitEqual(state.at(name)));
  }
}

}  // namespace
}  // namespace meshflow::autodiff_test
