// The planner's estimate against the simulator (issue 18): random GPTs ×
// random clusters — fast and slow networks, one to four nodes of two to eight
// devices, sub-node stages whose neighbours sit on other nodes — planned with
// the final choice by simulation; each plan's estimated step (p.step_time)
// is compared with its simulated step (simulate(p).step_time). A second sweep
// asks for each schedule, recomputation and sharded optimizer state in turn,
// so that the replay's every path (planner/StepReplay.h) meets the simulator.
#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ir/Plan.h"
#include "passes/Planner.h"
#include "runtime/sim/PlanSimulation.h"
#include "tests/unit/graph/GraphBuilder.h"

using namespace meshflow;

namespace {

// The target: every plan's estimate within 5% of its simulation.
constexpr double kTarget = 0.05;

struct Case {
  std::string text;
  double estimated = 0;
  double simulated = 0;
  double error() const { return estimated / simulated - 1; }
};

ir::Cluster randomCluster(std::mt19937& rng, std::string& text) {
  ir::Cluster c;
  c.nodes = 1 + std::int64_t(rng() % 4);
  c.devicesPerNode = std::array<std::int64_t, 3>{2, 4, 8}[rng() % 3];
  c.device = {"gpu", 40e9, 100e12 * (1 + rng() % 4), 1e12 * (1 + rng() % 2)};
  c.intraNode = {std::array{32e9, 150e9, 300e9}[rng() % 3], 2e-6};
  // The node's network: from a slow 25 Gb/s to 200 GB/s.
  c.interNode = {std::array{3.125e9, 12.5e9, 50e9, 200e9}[rng() % 4], 10e-6};
  text = fmt::format("{}x{} nodes, {:.0f} TFLOP/s, intra {:.0f} GB/s, inter {:.4g} GB/s per node",
                     c.nodes, c.devicesPerNode, c.device.peakFlops / 1e12,
                     c.intraNode.bandwidth / 1e9, c.interNode.bandwidth / 1e9);
  return c;
}

// The hints of the second sweep, one set per case in turn.
struct Hints {
  std::optional<ir::ScheduleKind> schedule;
  std::optional<std::string> recompute;
  std::optional<bool> shardOptimizer;
};

const std::vector<Hints>& hintedCases() {
  static const std::vector<Hints> hints = {
      {ir::ScheduleKind::kGPipe, {}, {}},         {ir::ScheduleKind::kOneFOneB, "full", {}},
      {ir::ScheduleKind::kInterleaved, {}, {}},   {ir::ScheduleKind::kZeroBubbleH1, "full", {}},
      {ir::ScheduleKind::kZeroBubbleV, {}, {}},   {{}, "selective", {}},
      {{}, {}, true},                             {ir::ScheduleKind::kOneFOneB, "full", true},
      {ir::ScheduleKind::kInterleaved, "full", {}}, {ir::ScheduleKind::kZeroBubbleV, "full", true},
  };
  return hints;
}

Case plannedCase(std::mt19937& rng, const Hints& hints = {}) {
  Case k;
  std::string clusterText;
  ir::Cluster cluster = randomCluster(rng, clusterText);
  test::GptConfig gpt{2 + std::int64_t(rng() % 7),
                      std::array<std::int64_t, 3>{256, 512, 1024}[rng() % 3], 8,
                      std::array<std::int64_t, 2>{128, 512}[rng() % 2], 8192};
  ir::Graph forward = test::buildGpt(gpt);
  passes::PlanRequest request;
  request.globalBatch = std::array<std::int64_t, 3>{16, 32, 64}[rng() % 3];
  request.simulateStep = runtime::sim::simulatePlanStep;
  request.schedule = hints.schedule;
  request.recompute = hints.recompute;
  request.shardOptimizerState = hints.shardOptimizer;
  k.text = fmt::format("gpt(layers = {}, hidden = {}, seq = {}) batch {} on {}", gpt.layers,
                       gpt.hidden, gpt.seq, request.globalBatch, clusterText);
  ir::Plan plan;
  try {
    plan = passes::planTraining(forward, cluster, request);
  } catch (const passes::PlanningError&) {
    if (!hints.schedule && !hints.recompute && !hints.shardOptimizer) throw;
    k.text += "; refused";  // a hint this model or cluster cannot take
    return k;
  }
  k.text += "; plan: " + plan.description;
  k.estimated = plan.stepTime;
  k.simulated = runtime::sim::simulatePlanStep(plan, cluster);
  return k;
}

// |estimate / simulated - 1| of the cases that planned, sorted.
std::vector<double> sortedErrors(const std::vector<Case>& cases) {
  std::vector<double> errors;
  for (const Case& c : cases)
    if (c.simulated > 0) errors.push_back(std::abs(c.error()));
  std::sort(errors.begin(), errors.end());
  return errors;
}

void report(const std::vector<Case>& cases, const std::vector<double>& errors) {
  INFO(fmt::format("|estimate / simulated - 1|: median {:.4f}, largest {:.4f} over {} plans",
                   errors[errors.size() / 2], errors.back(), errors.size()));
  if (std::getenv("MESHFLOW_SWEEP_PRINT"))
    for (const Case& c : cases)
      WARN(fmt::format("{:+.4f} {}", c.simulated > 0 ? c.error() : 0.0, c.text));
  // The target: every plan within 5%. Measured (docs/planning.md):
  // every one of the 40 within 1e-9, as the placed candidate's replay runs
  // the step as lowering and the simulator do. Before the replay the closed
  // forms gave a median of 0.021 and a largest gap of 0.368 (30 of 40 within
  // 5%).
  CHECK(errors.back() <= kTarget);
}

}  // namespace

TEST_CASE("the planner's estimate stays near the simulated step over random models and clusters",
          "[planning][simulator][sweep]") {
  std::mt19937 rng(20261127);
  std::vector<Case> cases;
  for (int trial = 0; trial < 40; ++trial) cases.push_back(plannedCase(rng));
  report(cases, sortedErrors(cases));
}

TEST_CASE("the estimate meets the simulation under every schedule, recomputation and ZeRO",
          "[planning][simulator][sweep]") {
  std::mt19937 rng(20261128);
  std::vector<Case> cases;
  for (const Hints& hints : hintedCases()) cases.push_back(plannedCase(rng, hints));
  const std::vector<double> errors = sortedErrors(cases);
  // Most hints plan on most draws; a refusal is the hint's, not the estimate's.
  CHECK(errors.size() >= 7);
  report(cases, errors);
}

// The reproduction: a 12-block transformer on 2 nodes of 4 L40S-class
// GPUs (362 TFLOP/s dense bf16, 48 GB, 864 GB/s; PCIe 4.0 x16 between the GPUs
// of a node, 32 GB/s; 25 Gb/s between nodes). The planner chose a 4-stage plan
// estimated at 297 ms that simulated at 442 ms over a 2-stage one that
// simulated at 352 ms. The search now prices the transfers a pipeline of
// sub-node stages sends over the network and the gradient buckets as lowering
// emits them; the placed finalists are replayed, and the fastest simulated is
// chosen: 2 stages of (1, 4) under GPipe, estimated and simulated at 117.6 ms
// (before: 4 stages of 2 devices estimated at 139 ms, simulated at 176 ms).
TEST_CASE("on L40S nodes over a slow network the plan chosen simulates fastest",
          "[planning][simulator]") {
  ir::Cluster cluster;
  cluster.nodes = 2;
  cluster.devicesPerNode = 4;
  cluster.device = {"L40S", 48e9, 362e12, 864e9};
  cluster.intraNode = {32e9, 2e-6};
  cluster.interNode = {3.125e9, 10e-6};
  ir::Graph forward = test::buildGpt({12, 1024, 16, 512, 32768});
  passes::PlanRequest request;
  request.globalBatch = 64;
  request.simulateStep = runtime::sim::simulatePlanStep;
  ir::Plan plan = passes::planTraining(forward, cluster, request);
  const double simulated = runtime::sim::simulatePlanStep(plan, cluster);
  CHECK(plan.simulatedStepTime == Approx(simulated).epsilon(1e-9));
  int simulatedAlternatives = 0;
  for (const ir::PlanAlternative& a : plan.alternatives) {
    if (!a.plan || a.plan->simulatedStepTime <= 0) continue;
    ++simulatedAlternatives;
    INFO(a.description << ": simulated " << a.plan->simulatedStepTime << " s against the chosen "
                       << simulated << " s");
    CHECK(simulated <= a.plan->simulatedStepTime * (1 + 1e-12));
  }
  CHECK(simulatedAlternatives >= 1);
  INFO(plan.description << ": estimated " << plan.stepTime << " s, simulated " << simulated);
  CHECK(std::abs(plan.stepTime / simulated - 1) <= 0.05);
  CHECK(simulated < 0.15);  // well under the best plan, 352 ms
}
