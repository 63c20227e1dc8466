// Models and plans for the parallel runtime's tests: small .mesh models traced
// through the interpreter, random stage cuts and schedules, and the check that a
// parallel run equals the serial reference.
#pragma once

#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <array>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "interp/Tracing.h"
#include "meshflow/meshflow.h"
#include "passes/Autodiff.h"
#include "passes/strategies/Strategy.h"
#include "runtime/data/DataSource.h"
#include "runtime/parallel/ParallelTrainer.h"
#include "runtime/reference/SerialExecutor.h"

namespace meshflow::parallel_test {

/// The forward graph of a model expression, e.g. "gpt(layers = 2, hidden = 16, …)".
/// A three-layer MLP with a residual tanh branch and a mean-squared loss: the
/// small model the hand-picked plans of the parallel tests run.
inline const char* kMlp3 = R"(
model mlp3(width = 8) {
  let x = input("x", f32[batch, 6])
  let y = input("y", f32[batch, 3])
  var h = relu(linear(x, width, name = "fc1"))
  h = h + tanh(linear(h, width, name = "fc2"))
  let out = linear(h, 3, name = "fc3")
  return mean((out - y) * (out - y))
}
)";

inline ir::Graph traceModel(const std::string& prelude, const std::string& model) {
  Interpreter interpreter;
  auto status = interpreter.eval("import std.models\n" + prelude + "\ntrace(" + model + ")", "test.mesh");
  INFO(renderAll(status.diagnostics));
  REQUIRE(status.ok);
  auto* graph = dynamic_cast<interp::GraphObject*>(status.value->object().get());
  REQUIRE(graph != nullptr);
  return graph->graph();
}

/// Compute ops of the forward graph (the ones a plan places), in order.
inline std::vector<ir::OpId> computeOps(const ir::Graph& forward) {
  std::vector<ir::OpId> ops;
  for (ir::OpId id = 0; id < forward.ops().size(); ++id) {
    ir::OpKind kind = forward.op(id).kind;
    if (kind != ir::OpKind::Input && kind != ir::OpKind::Parameter && kind != ir::OpKind::Constant)
      ops.push_back(id);
  }
  return ops;
}

/// Stage of each forward op when the compute ops are cut at `cuts` (ascending
/// positions in computeOps order, each starting a new stage).
inline std::vector<int> stagesAt(const ir::Graph& forward, const std::vector<std::size_t>& cuts) {
  std::vector<int> stages(forward.ops().size(), 0);
  auto ops = computeOps(forward);
  for (std::size_t i = 0, s = 0; i < ops.size(); ++i) {
    while (s < cuts.size() && i >= cuts[s]) ++s;
    stages[ops[i]] = static_cast<int>(s);
  }
  return stages;
}

/// `stages` stages with cuts spread evenly over the compute ops.
inline std::vector<int> evenStages(const ir::Graph& forward, int stages) {
  std::vector<std::size_t> cuts;
  std::size_t n = computeOps(forward).size();
  for (int s = 1; s < stages; ++s) cuts.push_back(n * static_cast<std::size_t>(s) / static_cast<std::size_t>(stages));
  return stagesAt(forward, cuts);
}

/// A random strategy for every forward op on an a × b logical mesh, drawn from
/// the planner's strategy families at `batch` samples; `sharded`, if given,
/// counts the outputs that are not replicated.
inline std::map<ir::OpId, runtime::PlannedSpecs> randomStrategies(const ir::Graph& forward, std::int64_t batch,
                                                                  std::array<std::int64_t, 2> meshShape,
                                                                  std::mt19937& rng, int* sharded = nullptr) {
  ir::LogicalMesh mesh;
  mesh.shape = meshShape;
  std::map<ir::OpId, runtime::PlannedSpecs> planned;
  for (ir::OpId id = 0; id < forward.ops().size(); ++id) {
    if (forward.op(id).kind == ir::OpKind::Constant) continue;
    passes::OpContext ctx{forward, id, batch, mesh, std::vector<bool>(forward.op(id).inputs.size(), true), {}};
    std::vector<passes::Strategy> options = passes::strategiesFor(ctx);
    const passes::Strategy& s = options[rng() % options.size()];
    planned[id] = {s.inputs, s.outputs};
    if (sharded)
      for (const auto& spec : s.outputs) *sharded += spec.isReplicated() ? 0 : 1;
  }
  return planned;
}

/// Two pipeline stages, each on two data-parallel replicas (devices 0 and 2,
/// 1 and 3), 1F1B over two microbatches.
inline runtime::ParallelPlan twoStagesTwoReplicas(const ir::Graph& forward) {
  runtime::ParallelPlan plan;
  plan.virtualStages = 2;
  plan.stageOfForwardOp = evenStages(forward, 2);
  plan.rankDevices = {{0, 2}, {1, 3}};
  plan.schedule = "1f1b";
  plan.microbatches = 2;
  return plan;
}

/// One stage on a 2 x 2 mesh of devices 0-3, each op on a random strategy
/// (for a batch of 8), 1F1B over `microbatches`.
inline runtime::ParallelPlan twoByTwoMesh(const ir::Graph& forward, std::mt19937& rng, int microbatches) {
  runtime::ParallelPlan plan;
  plan.virtualStages = 1;
  plan.stageOfForwardOp = evenStages(forward, 1);
  plan.rankDevices = {{0, 1, 2, 3}};
  plan.rankMeshes = {{2, 2}};
  plan.strategies = randomStrategies(forward, 8, {2, 2}, rng);
  plan.schedule = "1f1b";
  plan.microbatches = microbatches;
  return plan;
}

/// Options for a step of `batch` samples, everything else by default.
inline runtime::ParallelOptions optionsFor(std::int64_t batch) {
  runtime::ParallelOptions options;
  options.batch = batch;
  return options;
}

struct RunResult {
  std::vector<double> losses;
  std::vector<double> moeDropped;  ///< Per step: the choices moe_dispatch dropped.
  runtime::TensorMap state;
};

/// `steps` steps of the serial reference.
inline RunResult runSerial(const passes::TrainingGraph& training, std::int64_t batch, int steps,
                           std::uint64_t seed) {
  RunResult r;
  runtime::SerialExecutor executor(training.graph, {batch, true});
  runtime::initializeParameters(training.graph, seed, r.state);
  auto data = runtime::syntheticData(seed);
  for (int step = 1; step <= steps; ++step) {
    r.losses.push_back(executor.run(data->batch(training.graph, batch, step - 1), r.state, step).at(0).item());
    r.moeDropped.push_back(executor.lastStats().moeDropped);
  }
  return r;
}

/// `steps` steps of the parallel runtime on `plan`, its devices on `host`
/// (null: the cpu backend's threads).
inline RunResult runParallel(const passes::TrainingGraph& training, const runtime::ParallelPlan& plan,
                             runtime::ParallelOptions options, int steps, std::uint64_t seed,
                             std::unique_ptr<runtime::DeviceHost> host = nullptr) {
  RunResult r;
  runtime::ParallelTrainer trainer(training, plan, options, std::move(host));
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, seed, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(seed);
  for (int step = 1; step <= steps; ++step) {
    auto result = trainer.step(data->batch(training.graph, options.batch, step - 1), step);
    r.losses.push_back(result.loss);
    r.moeDropped.push_back(result.moeDropped);
  }
  r.state = trainer.state();
  return r;
}

/// Elements of `a` outside |a − b| <= atol + rtol·|b|.
inline std::size_t countFar(const runtime::Tensor& a, const runtime::Tensor& b, double rtol, double atol) {
  auto x = a.f32();
  auto y = b.f32();
  std::size_t far = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    far += std::abs(double(x[i]) - y[i]) <= atol + rtol * std::abs(y[i]) ? 0 : 1;
  return far;
}

/// Losses and every parameter and optimizer-state tensor agree within fp32
/// tolerance. Adam divides by √v, so an element whose gradient nearly cancels
/// (a sum added in another order) can step differently by up to 2·lr, and in
/// the next step the small differences this leaves in the weights move other
/// such elements. Adam's parameters (those with `.adam_m` state) may therefore
/// have a few elements (at most 1%, at least one) outside the tolerance, each
/// within 2·lr (default 1e-3) per step; their moments stay within it, which
/// also catches a wrongly scaled gradient.
inline void requireSameRun(const RunResult& parallel, const RunResult& serial, double rtol = 2e-4,
                           double atol = 2e-5) {
  const double adamStep = 2e-3 * static_cast<double>(serial.losses.size());
  REQUIRE(parallel.losses.size() == serial.losses.size());
  for (std::size_t i = 0; i < serial.losses.size(); ++i) {
    INFO("step " << i + 1);
    REQUIRE(parallel.losses[i] == Approx(serial.losses[i]).epsilon(rtol).margin(atol));
  }
  // Every plan counts the serial run's drops past capacity, once.
  REQUIRE(parallel.moeDropped == serial.moeDropped);
  REQUIRE(parallel.state.size() == serial.state.size());
  for (const auto& [name, tensor] : serial.state) {
    INFO(name << ": max |diff| " << runtime::maxAbsDiff(parallel.state.at(name), tensor));
    const runtime::Tensor& mine = parallel.state.at(name);
    if (serial.state.count(name + ".adam_m") == 0) {
      REQUIRE(runtime::allClose(mine, tensor, rtol, atol));
      continue;
    }
    REQUIRE(runtime::maxAbsDiff(mine, tensor) <= adamStep);
    REQUIRE(countFar(mine, tensor, rtol, atol) <= std::max<std::size_t>(1, tensor.f32().size() / 100));
  }
}

}  // namespace meshflow::parallel_test
