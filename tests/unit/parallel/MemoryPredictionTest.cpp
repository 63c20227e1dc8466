// The plan's per-device memory against what the runtime's devices really hold
// (docs/planning.md, "Memory"): random small models × random planned runs
// (stages, replicas, tensor parallelism, microbatches, schedule,
// recomputation, sharded optimizer state), each device's
// measured peak (its DeviceMemory's accounting) within 10% of the plan's
// peakMemoryBytes for its stage — or, where the model is known to leave
// something out, within the wider bound of the category that names it; at
// least 90% of all devices, and every device of a tensor-parallel mesh that
// holds 1 MiB or more, within 10%.
// MESHFLOW_MEMORY_REPORT=1 prints every device's figures.
#include <cstdlib>

#include "ParallelModels.h"
#include "passes/Planner.h"
#include "runtime/parallel/PlanExecution.h"

using namespace meshflow;
using namespace meshflow::parallel_test;

namespace {

ir::Cluster cpuCluster(int devices) {
  ir::Cluster c;
  c.nodes = 1;
  c.devicesPerNode = devices;
  c.device = {"cpu-thread", 4.0 * (1 << 30), 50e9, 10e9};
  c.intraNode = {10e9, 1e-6};
  c.interNode = c.intraNode;
  return c;
}

struct Drawn {
  int devices;
  passes::PlanRequest request;
  std::string text;
};

Drawn drawRequest(std::mt19937& rng) {
  const int stages = 1 + static_cast<int>(rng() % 2);
  const int replicas = 1 + static_cast<int>(rng() % 2);
  const int tensorParallel = rng() % 4 == 0 ? 2 : 1;
  const int microbatches = stages == 1 ? 1 + static_cast<int>(rng() % 2) : 2 << (rng() % 2);
  const ir::ScheduleKind kinds[] = {ir::ScheduleKind::kOneFOneB, ir::ScheduleKind::kGPipe,
                                    ir::ScheduleKind::kZeroBubbleH1,
                                    ir::ScheduleKind::kInterleaved};
  const ir::ScheduleKind kind = kinds[rng() % (stages > 1 ? 4 : 3)];
  const char* recompute[] = {"none", "selective", "full"};
  Drawn d{stages * replicas * tensorParallel, {}, ""};
  d.request.globalBatch = 16;
  d.request.stages = stages;
  d.request.dataParallel = replicas;
  d.request.microbatches = microbatches;
  d.request.schedule = kind;
  d.request.maxTensorParallel = tensorParallel;
  d.request.recompute = recompute[rng() % 3];
  d.request.shardOptimizerState = replicas > 1 && rng() % 3 == 0;
  d.text = fmt::format(
      "{} stages × {} replicas × up to {} tensor-parallel, {} microbatches, {}, recompute {}{}",
      stages, replicas, tensorParallel, microbatches, ir::scheduleKindName(kind),
      *d.request.recompute, *d.request.shardOptimizerState ? ", sharded optimizer" : "");
  return d;
}

struct DeviceCheck {
  double measured = 0;
  double predicted = 0;
  runtime::MemoryBreakdown breakdown{};
};

// Two steps of the planned run; each device's peak beside its stage's prediction.
std::vector<DeviceCheck> measure(const ir::Graph& forward, const passes::TrainingGraph& training,
                                 const ir::Plan& plan, std::int64_t batch, bool fusedAttention = false) {
  runtime::ParallelPlan parallel = runtime::parallelPlanOf(forward, plan);
  parallel.fusedAttention = fusedAttention;
  runtime::ParallelTrainer trainer(training, parallel, optionsFor(batch));
  runtime::TensorMap state;
  runtime::initializeParameters(training.graph, 1, state);
  trainer.setState(state);
  auto data = runtime::syntheticData(1);
  runtime::ParallelStepResult result;
  for (int step = 1; step <= 2; ++step)
    result = trainer.step(data->batch(training.graph, batch, step - 1), step);
  std::vector<DeviceCheck> out(result.memory.size());
  for (const ir::PlanStage& stage : plan.stages)
    for (int d : stage.devices) {
      const runtime::MemoryStats& s = result.memory.at(static_cast<std::size_t>(d));
      out.at(static_cast<std::size_t>(d)) = {double(s.peak), stage.peakMemoryBytes,
                                             s.peakBreakdown};
    }
  return out;
}

bool tensorParallel(const ir::Plan& plan) {
  for (const ir::PlanStage& stage : plan.stages)
    if (stage.logicalMesh[1] > 1) return true;
  return false;
}

std::string breakdownText(const runtime::MemoryBreakdown& b) {
  std::string text;
  for (std::size_t c = 0; c < runtime::kMemoryCategories; ++c)
    text += fmt::format("{}{} {}", c ? ", " : "",
                        runtime::memoryCategoryName(static_cast<runtime::MemoryCategory>(c)),
                        runtime::bytesText(double(b[c])));
  return text;
}

}  // namespace

TEST_CASE("each device's measured peak is within 10% of the plan's prediction",
          "[parallel][memory][prediction]") {
  const std::vector<std::string> models = {
      "gpt(layers = 2, hidden = 64, heads = 4, seq = 64, vocab = 96)",
      "gpt(layers = 3, hidden = 32, heads = 2, seq = 48, vocab = 64)",
      "gpt(layers = 2, hidden = 96, heads = 4, seq = 32, vocab = 128)",
  };
  std::mt19937 rng(20261127);
  int devices = 0, within = 0, planned = 0;
  int spmdDevices = 0, spmdWithin = 0;  // devices of tensor-parallel meshes
  std::vector<std::string> unexplained;
  for (const std::string& model : models) {
    ir::Graph forward = traceModel("", model);
    auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
    for (int trial = 0; trial < 8; ++trial) {
      Drawn d = drawRequest(rng);
      ir::Plan plan;
      try {
        plan = passes::planTraining(forward, cpuCluster(d.devices), d.request);
      } catch (const passes::PlanningError&) {
        continue;  // e.g. more stages than the model has layers to cut
      }
      ++planned;
      std::vector<DeviceCheck> checks = measure(forward, training, plan, d.request.globalBatch);
      for (std::size_t device = 0; device < checks.size(); ++device) {
        const DeviceCheck& c = checks[device];
        const double ratio = c.measured / c.predicted;
        ++devices;
        const std::string text =
            fmt::format("{}: {}: device {}: measured {} ({}), predicted {}, ratio {:.3f}", model,
                        d.text, device, runtime::bytesText(c.measured), breakdownText(c.breakdown),
                        runtime::bytesText(c.predicted), ratio);
        if (std::getenv("MESHFLOW_MEMORY_REPORT")) fmt::print("{}\n", text);
        // Devices of a tensor-parallel mesh that hold 1 MiB or more (the
        // smaller ones are in the small devices' category below, whatever
        // their mesh: under load a 286 KiB device measured 0.89).
        const bool spmd = tensorParallel(plan) && c.predicted >= (1 << 20);
        spmdDevices += spmd ? 1 : 0;
        if (std::abs(ratio - 1) <= 0.10) {
          ++within;
          spmdWithin += spmd ? 1 : 0;
          continue;
        }
        // Tensor-parallel meshes have no category of their own: their
        // backward keeps the forward's split (runtime/parallel/SpmdRules.h),
        // so they hold what the plan prices. (Until the row-wise rules every
        // backward op after the loss ran whole on every device, 1.15-1.38×
        // the prediction.)
        // Small devices (a peak under 1 MiB, e.g. an interleaved rank holding
        // the embedding): the values a RUN makes and frees again (its largest
        // op's inputs and outputs, a received carry) are not counted and are a
        // large share of so little, and a message stays charged to its sender
        // until the receiver takes it, so when the peer receives (under load,
        // how late) moves them by a few of these messages.
        if (c.predicted < (1 << 20) && ratio >= 0.5 && ratio <= 2) continue;
        // Over-predicted by up to 15%: the safe side of the model's upper
        // bounds (a backward's layer taken to make all its weight gradients
        // before it frees any of its stash; a value one layer makes and only
        // the next layer's backward reads counted in both when they share a
        // stage: 80 KiB per microbatch on the GPipe last stage of 4
        // microbatches that lands at 0.897). Both offset the backward's
        // working set, which is not counted (docs/planning.md, "Memory").
        if (ratio >= 0.85 && ratio < 1) continue;
        unexplained.push_back(text);
      }
    }
  }
  INFO(within << " of " << devices << " devices within 10%; on tensor-parallel meshes "
              << spmdWithin << " of " << spmdDevices);
  CHECK(planned >= 18);
  CHECK(spmdDevices >= 10);
  CHECK(spmdWithin == spmdDevices);
  // 68-69 of 70 on a quiet machine, 67 with two other runs beside it (the
  // small devices move with message timing); every device outside is in a
  // named category or the check below fails.
  CHECK(within >= devices * 90 / 100);
  std::string list;
  for (const std::string& u : unexplained) list += u + "\n";
  INFO(list);
  CHECK(unexplained.empty());
}

TEST_CASE("a plan priced with fused attention holds what the runtime's fused attention holds",
          "[parallel][memory][prediction][attention]") {
  // Scores of 4 heads × 64 × 64 per sample: what the fused attention never makes.
  ir::Graph forward = traceModel("", "gpt(layers = 2, hidden = 64, heads = 4, seq = 64, vocab = 96)");
  auto training = passes::buildTrainingGraph(forward, passes::OptimizerConfig::adam());
  struct Shape {
    int stages, replicas;
    const char* recompute;
  };
  for (const Shape& shape : {Shape{1, 1, "none"}, Shape{2, 1, "none"}, Shape{1, 2, "none"}, Shape{2, 1, "full"}}) {
    passes::PlanRequest request;
    request.globalBatch = 16;
    request.stages = shape.stages;
    request.dataParallel = shape.replicas;
    request.microbatches = shape.stages == 1 ? 1 : 2;
    request.maxTensorParallel = 1;
    request.recompute = shape.recompute;
    const int devices = shape.stages * shape.replicas;
    ir::Cluster fusing = cpuCluster(devices);
    fusing.device.fusedKernels = true;
    const ir::Plan plan = passes::planTraining(forward, fusing, request);
    const ir::Plan unfusedPlan = passes::planTraining(forward, cpuCluster(devices), request);
    const std::vector<DeviceCheck> fused = measure(forward, training, plan, 16, true);
    const std::vector<DeviceCheck> unfused = measure(forward, training, plan, 16, false);
    std::vector<double> unfusedPredicted(unfused.size());
    for (const ir::PlanStage& stage : unfusedPlan.stages)
      for (int d : stage.devices) unfusedPredicted.at(static_cast<std::size_t>(d)) = stage.peakMemoryBytes;
    for (std::size_t d = 0; d < fused.size(); ++d) {
      const DeviceCheck& c = fused[d];
      const std::string text = fmt::format(
          "{} stages × {} replicas, recompute {}: device {}: fused measured {} ({}), predicted {}, ratio {:.3f}; "
          "the plan run unfused: measured {}; the unfused plan predicts {}",
          shape.stages, shape.replicas, shape.recompute, d, runtime::bytesText(c.measured), breakdownText(c.breakdown),
          runtime::bytesText(c.predicted), c.measured / c.predicted, runtime::bytesText(unfused[d].measured),
          runtime::bytesText(unfusedPredicted[d]));
      INFO(text);
      if (std::getenv("MESHFLOW_MEMORY_REPORT")) fmt::print("{}\n", text);
      // Within 10%, or over-predicted by up to 15% as in the test above (the
      // last stage's backward is priced holding all its weight gradients
      // before it frees its stash: 0.92 unfused, 0.87-0.89 fused here).
      const double ratio = c.measured / c.predicted;
      CHECK(ratio >= 0.85);
      CHECK(ratio <= 1.10);
      // Without the scores the device holds less, as the plan says it will.
      CHECK(c.measured < unfused[d].measured);
      CHECK(c.predicted < unfusedPredicted[d]);
    }
  }
}
