// Typed results for a C++ host: a plan, a simulation and a training run as
// plain structs (meshflow.h's Interpreter::planResult, simulationResult and
// trainResult read them from the values plan(...), simulate(p) and train(...)
// return), and what the host's callbacks receive. docs/embedding.md, "Plans,
// simulations and training from C++".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace meshflow {

/// The sharding the planner chose for one op of a stage.
struct OpSharding {
  std::string scope;     ///< "block0.mlp.fc1"
  std::string kind;      ///< "matmul"
  std::string strategy;  ///< "RS1 = RR x RS1" (may be empty)
};

/// One pipeline stage of a plan (a virtual stage under an interleaved schedule).
struct PlanStage {
  int firstLayer = 0;  ///< Layers [firstLayer, endLayer).
  int endLayer = 0;
  std::array<std::int64_t, 2> submesh{1, 1};      ///< (nodes, devices per node)
  std::array<std::int64_t, 2> logicalMesh{1, 1};  ///< (data rows, tensor columns)
  std::vector<int> devices;                       ///< Physical device ids.
  double forwardSeconds = 0;   ///< One microbatch, estimated.
  double backwardSeconds = 0;
  double peakMemoryBytes = 0;  ///< On each of its devices.
  double parameterBytes = 0;   ///< Weights and optimizer state.
  double gradientBytes = 0;
  double heldActivationBytes = 0;  ///< Per microbatch held from forward to backward.
  std::string recompute;           ///< "none", "selective" or "full".
  std::vector<OpSharding> strategies;
};

/// A plan the planner weighed and did not choose.
struct PlanAlternativeResult {
  std::string description;
  double stepSeconds = 0;
};

/// A plan made by plan(...).
struct PlanResult {
  std::string model;
  std::vector<PlanStage> stages;
  std::string schedule;  ///< "1f1b", "gpipe", "interleaved", "zb-h1", "zbv"
  int microbatches = 1;
  int chunks = 1;  ///< Virtual stages per pipeline rank.
  std::int64_t globalBatch = 1;
  double stepSeconds = 0;  ///< Estimated.
  double peakMemoryBytes = 0;
  double tflopsPerDevice = 0;
  std::vector<PlanAlternativeResult> alternatives;
  std::vector<std::string> notes;
  std::string json;  ///< What p.save(path) writes (docs/planning.md lists its keys).
};

/// One simulated step of a plan (simulate(p)).
struct SimulationResult {
  double stepSeconds = 0;
  double bubbleFraction = 0;             ///< Mean over devices.
  std::vector<double> peakMemoryBytes;   ///< Per device.
  double communicationBytes = 0;
};

/// What train(...) returned.
struct TrainResult {
  std::vector<double> losses;  ///< Of the steps this call ran.
  std::int64_t steps = 0;
  std::int64_t firstStep = 1;
  double seconds = 0;
  double throughput = 0;
  std::string unit;  ///< "tokens/s" or "samples/s"
};

/// Config::onTrainStep's argument: one training step just finished.
struct TrainStep {
  std::string model;
  std::int64_t step = 0;  ///< 1-based.
  std::int64_t steps = 0; ///< Of this train() call.
  double loss = 0;
  double seconds = 0;          ///< Wall time of the step.
  double peakMemoryBytes = 0;  ///< Largest over devices, when measured (else 0).
};

/// A batch a host's loader feeds to train(): token ids and the labels that
/// follow them, each `batch × seq` row-major (Interpreter::defineTokenData).
struct TokenBatch {
  std::vector<std::int32_t> tokens;
  std::vector<std::int32_t> labels;
};

}  // namespace meshflow
